"""Rule ids: the protocol docstrings state each rule with an id in brackets
(``[vector.query.min-score-inclusive]``), and each contract test names the
rules it checks with ``@checks(...)``. ``protocol_rules()`` reads the stated
ids; the report (``ragkit.testing.contracts.report``, ``python -m
ragkit.testing.contracts --rules``) maps every rule to its tests.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

RULE_ID = re.compile(r"\[((?:store|kv|vector|graph|doc_status|lease|llm|embedder|reranker|cross)(?:\.[a-z0-9_-]+)+)\]")
"""A rule id as a docstring writes it: ``[kind.topic.detail]``."""

PROTOCOL_MODULES = (
    "ragkit.protocols.base",
    "ragkit.protocols.kv",
    "ragkit.protocols.vector",
    "ragkit.protocols.graph",
    "ragkit.protocols.doc_status",
    "ragkit.protocols.lease",
    "ragkit.protocols.models",
)


def checks(*rule_ids: str) -> Callable[[T], T]:
    """Mark a contract test as checking these rules (ids from the protocol docstrings)."""
    for rule in rule_ids:
        if not RULE_ID.fullmatch(f"[{rule}]"):
            raise ValueError(f"{rule!r} is not a rule id like 'vector.query.min-score-inclusive'")

    def mark(fn: T) -> T:
        fn.ragkit_rules = tuple(getattr(fn, "ragkit_rules", ())) + rule_ids  # type: ignore[attr-defined]
        return fn

    return mark


def _docstrings(obj: Any, seen: set[int]) -> Iterable[str]:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    doc = getattr(obj, "__doc__", None)
    if isinstance(doc, str):
        yield doc
    if inspect.ismodule(obj):
        members = [v for v in vars(obj).values() if getattr(v, "__module__", None) == obj.__name__]
    elif inspect.isclass(obj):
        members = list(vars(obj).values())
    else:
        return
    for value in members:
        value = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if inspect.isclass(value) or inspect.isfunction(value) or isinstance(value, property):
            yield from _docstrings(value, seen)


def protocol_rules() -> dict[str, str]:
    """Every rule id the protocol docstrings state -> the module stating it."""
    rules: dict[str, str] = {}
    for name in PROTOCOL_MODULES:
        module = importlib.import_module(name)
        for doc in _docstrings(module, set()):
            for rule in RULE_ID.findall(doc):
                rules.setdefault(rule, name)
    return rules
