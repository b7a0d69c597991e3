"""What the three model contracts (LLM, embedder, reranker) share: the inputs
that expose model bugs (blank texts, a whitespace-heavy prompt, distinct
prompts for concurrent calls) and the ``model_id`` checks (equal ids promise
equal outputs: an instance per changed option, compared with the original)."""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from pydantic import BaseModel

from ragkit.protocols.base import Capability
from ragkit.testing.contracts.base.contract import declared

BLANKS = ["", " ", "\n", "\t \n  "]
WHITESPACE_PROMPT = (
    "Repeat  after me:\n\n  alpha beta\tgamma   delta \n epsilon  zeta eta theta iota kappa "
    "lambda mu  nu xi omicron pi rho sigma tau upsilon phi chi psi omega\n"
)
"""A prompt whose echo (what the loopback servers and echo models answer) takes
many stream pieces with runs of spaces, tabs and newlines between them."""

DISTINCT_PROMPTS = [f"Question {i}: name {w} in one word." for i, w in enumerate(
    ["a colour", "a planet", "a river", "a metal", "a tree", "a bird"])]

VARIANT_TIMEOUT = 60.0


# -- model_id: equal ids promise equal outputs -------------------------------------------


def _changed_values(annotation: Any, value: Any) -> list[Any]:
    """Other values for an option: flipped bools, nudged numbers, a number
    for an unset numeric option. Strings and choices are left alone (another
    model name could mean a download)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1]
    if isinstance(value, float):
        return [value + 0.5, value / 2]
    if value is None:
        args = set(typing.get_args(annotation))
        if bool in args:
            return [True, False]
        if int in args:
            return [8]
        if float in args:
            return [0.5]
    return []


def option_variants(adapter: Any) -> list[tuple[str, Any]]:
    """``(description, instance)`` for each buildable instance whose options
    differ from ``adapter``'s in one numeric or boolean field."""
    options = getattr(adapter, "options", None)
    if not isinstance(options, BaseModel):
        return []
    base = options.model_dump()
    out = []
    for name, field in type(options).model_fields.items():
        for value in _changed_values(field.annotation, base.get(name)):
            try:
                variant = type(adapter)({**base, name: value})
            except Exception:  # not a valid value for this field: nothing to compare
                continue
            out.append((f"{name}={value!r}", variant))
            break
    return out


def pass_through_fields(adapter: Any) -> list[str]:
    """Option fields of type ``dict[str, Any]``: what adapters forward to the
    provider unread (``extra_body``, ``model_options``)."""
    options = getattr(adapter, "options", None)
    if not isinstance(options, BaseModel):
        return []
    return [
        name for name, field in type(options).model_fields.items()
        if typing.get_origin(field.annotation) is dict and typing.get_args(field.annotation) == (str, Any)
    ]


def check_pass_through_options_in_model_id(adapter: Any) -> None:
    """An entry added to a pass-through option changes ``model_id``: the
    adapter cannot know that what it forwards unread leaves outputs alone."""
    base = adapter.options.model_dump() if pass_through_fields(adapter) else {}
    for name in pass_through_fields(adapter):
        variant = type(adapter)({**base, name: {**(base.get(name) or {}), "ragkit_probe": 1}})
        assert variant.model_id != adapter.model_id, (
            f"option {name} is forwarded to the provider unread (it may set truncation, "
            f"dimensions, sampling...) but changing it keeps model_id {adapter.model_id!r}: "
            f"put it into model_id (model_identity(provider, model, {name}=...))"
        )


async def _close(model: Any) -> None:
    close = getattr(model, "aclose", None)
    if callable(close):
        result = close()
        if inspect.isawaitable(result):
            await result


async def _stable_output(call: Callable[[], Awaitable[Any]], same: Callable[[Any, Any], bool]) -> Any:
    """The output of ``call`` when two calls agree, else ``None`` (an output
    that changes by itself says nothing about options)."""
    try:
        first = await asyncio.wait_for(call(), VARIANT_TIMEOUT)
        second = await asyncio.wait_for(call(), VARIANT_TIMEOUT)
    except Exception:  # a variant that cannot answer (an option the backend refuses) proves nothing
        return None
    return first if same(first, second) else None


async def check_model_id_identifies_outputs(
    adapter: Any, call: Callable[[Any], Awaitable[Any]], same: Callable[[Any, Any], bool]
) -> None:
    check_pass_through_options_in_model_id(adapter)
    base = await _stable_output(lambda: call(adapter), same)
    assert base is not None or Capability.DETERMINISTIC not in declared(adapter), (
        "a DETERMINISTIC model gave two different outputs for the same input"
    )
    if base is None:
        return
    for described, variant in option_variants(adapter):
        try:
            out = await _stable_output(lambda: call(variant), same)
            if out is not None and not same(base, out):
                assert variant.model_id != adapter.model_id, (
                    f"with {described} the outputs change but model_id stays {adapter.model_id!r}: "
                    "cached results of one would be served for the other; put every "
                    "output-relevant option into model_id"
                )
        finally:
            await _close(variant)


def arrays_same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, atol=1e-4, rtol=0))


def same_instance_options(adapter):
    """A second instance built the way the core builds models, when possible."""
    options = getattr(adapter, "options", None)
    if options is None:
        return None
    try:
        return type(adapter)(options)
    except TypeError:
        return None


def check_model_id(adapter) -> None:
    model_id = adapter.model_id
    assert isinstance(model_id, str) and model_id.strip(), f"model_id must be a non-empty str, got {model_id!r}"
    assert adapter.model_id == model_id, "model_id changed between two reads"
    twin = same_instance_options(adapter)
    if twin is not None:
        assert twin.model_id == model_id, (
            f"a second instance with the same options has model_id {twin.model_id!r} != {model_id!r}: "
            "derive model_id only from provider, model and output-relevant options"
        )


def check_capabilities(adapter) -> None:
    caps = declared(adapter)
    assert all(isinstance(c, Capability) for c in caps), f"capabilities must be Capability members: {caps}"
