"""The vector protocol's ``filter`` as a Chroma ``where`` clause, and the
metadata Chroma can store faithfully.

==========================================  ==========================================================
ragkit filter                               Chroma ``where``
==========================================  ==========================================================
``{"color": "red"}``                        ``{"color": {"$eq": "red"}}``
``{"n": {"$in": [1, 2]}}``                  ``{"n": {"$in": [1, 2]}}``
``{"w": 0.5}``                              ``{"$and": [{"w": {"$eq": 0.5}}, {"w": {"$nin": [0, 1]}}]}``
``{"n": {"$in": [1, True, "x"]}}``          ``{"$or": [{"n": {"$in": [True]}}, {"n": {"$in": [1]}}, {"n": {"$in": ["x"]}}]}``
``{"color": "red", "n": 2}``                ``{"$and": [{"color": {"$eq": "red"}}, {"n": {"$eq": 2}}]}``
``{"n": {"$in": []}}``, ``{"n": None}``     ``NO_MATCH``: no record can match, Chroma is not asked
``{"n": {"$gt": 1}}``                       ``InvalidValueError`` (the protocol has ``$in`` only)
==========================================  ==========================================================

Chroma compares typed values the way ``ragkit.protocols.vector.matches_filter``
does: ``True`` matches only booleans and ``1`` never matches ``True``, while
``1`` and ``1.0`` match each other. Its ``$in`` wants values of one type, so
mixed lists are split into one ``$in`` per type joined by ``$or``. One quirk
(Chroma 1.5): a float with a fraction is truncated when compared with an
integer field (``{"$eq": 0.5}`` matches the int 0), so such values carry a
``$nin`` of their neighbouring integers, which no equal number can be.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ragkit.errors import InvalidValueError
from ragkit.protocols.vector import in_values, storable_scalar

Where = dict[str, Any]

_RESERVED_PREFIXES = ("#", "$", "chroma:")


class _NoMatch:
    def __repr__(self) -> str:
        return "NO_MATCH"


NO_MATCH: Final = _NoMatch()
"""A filter no stored record can satisfy."""


def storable_key(key: str) -> bool:
    """Chroma rejects empty keys and keys starting with ``#`` or ``$``, and
    silently drops keys starting with ``chroma:``."""
    return bool(key) and not key.startswith(_RESERVED_PREFIXES)



def check_metadata(metadata: Sequence[Mapping[str, Any]]) -> None:
    """Reject (before anything is written) what Chroma would refuse or alter."""
    for meta in metadata:
        for key, value in meta.items():
            if not storable_key(key):
                raise InvalidValueError(
                    f"metadata key {key!r} cannot be stored in Chroma: keys must be "
                    "non-empty and must not start with '#', '$' or 'chroma:'"
                )
            if not storable_scalar(value):
                raise InvalidValueError(
                    f"metadata {key!r}={value!r} cannot be stored in Chroma: integers "
                    "must fit in 64 bits"
                )


def _type_tag(value: Any) -> str:
    """Chroma's ``$in`` takes one type; fractions need their own guarded group."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float) and not value.is_integer():
        return "fraction"
    return type(value).__name__


def _guarded(field: str, op: str, operand: Any, fractions: list[float]) -> Where:
    """``{field: {op: operand}}`` that no integer can match (see the module docstring)."""
    near = sorted({math.floor(v) for v in fractions} | {math.ceil(v) for v in fractions})
    return {"$and": [{field: {op: operand}}, {field: {"$nin": near}}]}


def _clause(field: str, cond: Any) -> Where | _NoMatch:
    if isinstance(cond, Mapping):
        values = [v for v in in_values(field, cond) if storable_scalar(v)]
    else:
        values = [cond] if storable_scalar(cond) else []
    if not values or not storable_key(field):
        return NO_MATCH
    if not isinstance(cond, Mapping):
        value = values[0]
        if _type_tag(value) == "fraction":
            return _guarded(field, "$eq", value, [value])
        return {field: {"$eq": value}}
    groups: dict[str, list[Any]] = {}
    for value in values:
        groups.setdefault(_type_tag(value), []).append(value)
    parts = [
        _guarded(field, "$in", group, group) if tag == "fraction" else {field: {"$in": group}}
        for tag, group in sorted(groups.items())
    ]
    return parts[0] if len(parts) == 1 else {"$or": parts}


def to_where(filter: Mapping[str, Any] | None) -> Where | None | _NoMatch:
    """The ``where`` clause for ``filter``: ``None`` for no filter, ``NO_MATCH``
    when nothing can match; raises ``InvalidValueError`` for malformed filters."""
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise InvalidValueError(f"filter must be a mapping, got {type(filter).__name__}")
    clauses: list[Where] = []
    nothing = False
    for field, cond in filter.items():
        clause = _clause(field, cond) if isinstance(field, str) else NO_MATCH
        if clause is NO_MATCH:
            nothing = True  # keep going: a later malformed entry must still raise
        else:
            clauses.append(clause)  # type: ignore[arg-type]
    if nothing:
        return NO_MATCH
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}
