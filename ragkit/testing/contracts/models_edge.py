"""Model tests of the rules issue 19 added: ``model_id`` changes whenever
outputs would, duplicates and blank inputs inside one call, several
different calls in flight at once, and streams of many pieces with
whitespace. Each test names the rules it checks (``@checks``)."""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from pydantic import BaseModel

from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest
from ragkit.testing.contracts._base import declared, needs
from ragkit.testing.contracts.rules import checks

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


def _arrays_same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, atol=1e-4, rtol=0))


# -- LLM -------------------------------------------------------------------------------------


class LLMEdgeCaseTests:
    @checks("llm.model-id.identifies-outputs")
    async def test_model_id_changes_when_outputs_do(self, adapter):
        """Instances whose options differ in one numeric or boolean field and
        answer the same request differently (each consistently) have different
        ``model_id``s.

        Troubleshoot: ``model_identity(provider, model, **output_options)``.
        """
        request = ChatRequest(prompt="Name one renewable energy source.", max_tokens=20, temperature=0)
        await check_model_id_identifies_outputs(
            adapter, lambda m: m.complete(request), lambda a, b: a.text == b.text
        )

    @checks("llm.concurrent.distinct")
    async def test_different_concurrent_requests_get_their_own_answers(self, adapter):
        """Six *different* requests awaited together each get the answer that
        request gets alone (checked for every request whose answer is stable
        across two calls alone: always for DETERMINISTIC models).

        Troubleshoot: no per-call state on the adapter (the last request, a
        shared buffer); match responses to requests by their own call.
        """
        requests = [ChatRequest(prompt=p, max_tokens=30, temperature=0) for p in DISTINCT_PROMPTS]
        alone = [[(await adapter.complete(r)).text for r in requests] for _ in range(2)]
        together = [c.text for c in await asyncio.gather(*(adapter.complete(r) for r in requests))]
        for r, a, b, got in zip(requests, alone[0], alone[1], together):
            if a == b:
                assert got == a, f"{r.prompt!r} alone gives {a!r}, awaited with others {got!r}"
            else:
                assert Capability.DETERMINISTIC not in declared(adapter), f"DETERMINISTIC but {a!r} != {b!r}"

    @needs(Capability.STREAMING)
    @checks("llm.stream.concatenates")
    async def test_stream_of_many_pieces_keeps_whitespace(self, adapter):
        """(STREAMING) For an answer of many pieces separated by runs of
        whitespace, the joined stream equals ``complete``'s text (whenever
        ``complete`` gives that text twice in a row: always for DETERMINISTIC
        models).

        Troubleshoot: yield each delta as it is (no ``strip()``, no separator
        between pieces, the first and last included).
        """
        request = ChatRequest(prompt=WHITESPACE_PROMPT, temperature=0)
        first = (await adapter.complete(request)).text
        pieces = [p async for p in adapter.stream(request)]
        second = (await adapter.complete(request)).text
        assert all(isinstance(p, str) for p in pieces)
        if first == second:
            assert "".join(pieces) == first, (
                f"stream of {len(pieces)} pieces joins to {''.join(pieces)!r}; complete gives {first!r}"
            )


# -- embedder ------------------------------------------------------------------------------


class EmbedderEdgeCaseTests:
    @checks("embedder.model-id.identifies-outputs")
    async def test_model_id_changes_when_vectors_do(self, adapter):
        """Instances whose options differ in one numeric or boolean field and
        give different vectors have different ``model_id``s.

        Troubleshoot: put dimension, normalisation, truncation into model_id.
        """
        texts = ["Solar panels convert sunlight into electricity. " * 8, "wind"]
        await check_model_id_identifies_outputs(adapter, lambda m: m.embed(texts), _arrays_same)

    @checks("embedder.embed.duplicates")
    async def test_duplicate_texts_in_one_call(self, adapter):
        """A text repeated in one call gets the same row at each position, and
        the rows around the repeats are the rows of their own texts.

        Troubleshoot: de-duplicating before the provider call is fine; mapping
        the answers back must restore every position.
        """
        texts = ["alpha beta", "gamma", "alpha beta", "delta epsilon", "gamma", "alpha beta"]
        out = await adapter.embed(texts)
        assert out.shape == (len(texts), adapter.dimension)
        alone = {t: (await adapter.embed([t]))[0] for t in set(texts)}
        for i, t in enumerate(texts):
            assert np.allclose(out[i], alone[t], atol=1e-5, rtol=0), f"row {i} ({t!r}) is not that text's vector"

    @checks("embedder.embed.blank-nonzero")
    async def test_blank_texts_get_non_zero_vectors(self, adapter):
        """Blank texts (empty, spaces, newlines) get finite, non-zero rows,
        alone and between other texts.

        Troubleshoot: a provider refusing empty input, or a model returning zeros
        for it, must be answered with a usable vector (embed a placeholder),
        since every vector store rejects zero vectors.
        """
        texts = ["before", *BLANKS, "after"]
        out = await adapter.embed(texts)
        assert out.shape == (len(texts), adapter.dimension)
        assert np.isfinite(out).all()
        norms = np.linalg.norm(out.astype(np.float64), axis=1)
        zero = [repr(t) for t, n in zip(texts, norms) if not n > 0]
        assert not zero, f"zero vectors for {zero}: vector stores reject them"

    @checks("embedder.embed.concurrent")
    async def test_different_concurrent_calls_get_their_own_rows(self, adapter):
        """Six different ``embed`` calls awaited together each get the rows
        they get alone.

        Troubleshoot: no shared per-call buffers; match answers to calls.
        """
        calls = [[f"text {i} {w}", f"second {w} {i}"] for i, w in enumerate(["red", "blue", "green", "sun", "moon", "sea"])]
        alone = [await adapter.embed(c) for c in calls]
        together = await asyncio.gather(*(adapter.embed(c) for c in calls))
        for c, a, t in zip(calls, alone, together):
            assert np.allclose(a, t, atol=1e-5, rtol=0), f"embed({c!r}) awaited with others gave other rows"


# -- reranker ------------------------------------------------------------------------------

QUERY = "how do solar panels make electricity"


class RerankerEdgeCaseTests:
    @checks("reranker.model-id.identifies-outputs")
    async def test_model_id_changes_when_scores_do(self, adapter):
        """Instances whose options differ in one numeric or boolean field and
        give different scores have different ``model_id``s.

        Troubleshoot: put truncation and any score-changing option into model_id.
        """
        docs = ["Solar panels make electricity from sunlight. " * 20, "A cake recipe."]
        await check_model_id_identifies_outputs(adapter, lambda m: m.scores(QUERY, docs), _arrays_same)

    @checks("reranker.scores.duplicates", "reranker.scores.independent")
    async def test_duplicate_documents_in_one_call(self, adapter):
        """A document repeated in one call gets the same score at each position,
        equal to its score alone.

        Troubleshoot: providers answering with (index, score) pairs for unique
        documents must be mapped back to every position.
        """
        docs = ["solar panels make electricity", "cake recipe", "solar panels make electricity", "castles", "cake recipe"]
        out = await adapter.scores(QUERY, docs)
        assert len(out) == len(docs)
        alone = {d: (await adapter.scores(QUERY, [d]))[0] for d in set(docs)}
        got = [round(s, 5) for s in out]
        want = [round(alone[d], 5) for d in docs]
        assert np.allclose(out, [alone[d] for d in docs], atol=1e-5), f"scores {got}, alone {want}"

    @checks("reranker.scores.blank")
    async def test_blank_documents_get_finite_scores(self, adapter):
        """Blank documents get a finite float each, in their positions.

        Troubleshoot: providers refusing empty documents: score them locally
        (lowest) instead of failing or dropping them (which shifts the rest).
        """
        docs = ["solar panels", *BLANKS, "electricity"]
        out = await adapter.scores(QUERY, docs)
        assert len(out) == len(docs) and all(isinstance(s, float) and np.isfinite(s) for s in out), out
        alone = [(await adapter.scores(QUERY, [d]))[0] for d in (docs[0], docs[-1])]
        assert np.allclose([out[0], out[-1]], alone, atol=1e-5), "blank documents shifted the other scores"

    @checks("reranker.scores.concurrent")
    async def test_different_concurrent_calls_get_their_own_scores(self, adapter):
        """Five different ``scores`` calls awaited together each get the scores
        they get alone.

        Troubleshoot: no shared per-call state; match answers to calls.
        """
        calls = [(f"{w} power", [f"{w} power plants", "unrelated text", f"about {w}"]) for w in
                 ["solar", "wind", "water", "coal", "nuclear"]]
        alone = [await adapter.scores(q, d) for q, d in calls]
        together = await asyncio.gather(*(adapter.scores(q, d) for q, d in calls))
        for (q, _), a, t in zip(calls, alone, together):
            assert np.allclose(a, t, atol=1e-5), f"scores for {q!r} awaited with others: {t} != {a}"
