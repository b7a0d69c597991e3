"""The broken-adapter helpers: what the self-test runs the suite against.

Each kind keeps its deliberately broken adapters beside its contract, in
``<kind>/broken.py``; each subclasses that kind's reference adapter and adds
exactly one defect, named by its ``defect`` attribute, in the hooks an
adapter implements:

- ``DEFECTS`` (store kinds): the whole contract run against each must fail,
  in the test aimed at the defect, while the reference passes
  (``tests/testing/test_suite_catches_broken.py``);
- ``RULE_BREAKERS``: each breaks the protocol rule its ``violates``
  attribute names, the way a real backend tends to (a case-folding
  collation, an OFFSET scan, ``>`` pushed down for ``min_score``, a lease
  renewed without comparing its owner...); a contract test naming that rule
  with ``@checks`` must fail (``tests/testing/test_rules_catch_broken.py``);
  keyed by the contract that must catch them (the embedder's module also
  holds ``CrossProtocolContract``'s);
- ``REFERENCES``: contract -> the unbroken adapter its breakers derive from,
  the control that must pass the same contract.

A contract that passes against one of them does not check what the protocol
docstring promises. None is registered as a plugin, and none ever should be.
This module gathers them (``defect_doubles()``, ``rule_breaker_groups()``)
for the self-test and the report; it imports the kinds lazily, so a kind's
broken module can import ``MissingIdError`` from here.
"""

from __future__ import annotations

import importlib

KINDS = ("kv", "vector", "graph", "doc_status", "llm", "embedder", "reranker", "lease")
"""The kinds whose package has a ``broken`` module."""


class MissingIdError(KeyError):
    """What the strict-delete adapters raise: deleting a missing id should be a no-op."""


def _broken(kind: str) -> object:
    return importlib.import_module(f"ragkit.testing.contracts.{kind}.broken")


def defect_doubles() -> dict[str, tuple[type, ...]]:
    """Store kind -> its ``defect`` doubles (the kinds that have some)."""
    out = {}
    for kind in KINDS:
        defects = _broken(kind).DEFECTS
        if defects:
            out[kind] = defects
    return out


def rule_breaker_groups() -> dict[str, tuple[tuple[type, ...], type]]:
    """Contract class name -> (its ``violates`` doubles, the unbroken reference they derive from)."""
    out: dict[str, tuple[tuple[type, ...], type]] = {}
    for kind in KINDS:
        module = _broken(kind)
        for contract, breakers in module.RULE_BREAKERS.items():
            out[contract] = (breakers, module.REFERENCES[contract])
    return out


def rule_breakers() -> list[type]:
    """Every ``violates`` double."""
    return [cls for breakers, _ in rule_breaker_groups().values() for cls in breakers]
