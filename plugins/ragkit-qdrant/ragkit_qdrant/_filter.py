"""The vector protocol's ``filter`` as a Qdrant payload ``Filter``, and the
metadata Qdrant can store and filter faithfully.

====================================  =================================================================
ragkit filter                         Qdrant condition (inside ``Filter(must=[workspace, ...])``)
====================================  =================================================================
``{"color": "red"}``                  ``FieldCondition(key="color", match=MatchValue(value="red"))``
``{"color": {"$in": ["a", "b"]}}``    ``FieldCondition(key="color", match=MatchAny(any=["a", "b"]))``
``{"flag": True}``                    ``FieldCondition(key="flag", match=MatchValue(value=True))``
``{"n": 2}``, ``{"w": 0.75}``         ``FieldCondition(key="n", range=Range(gte=2, lte=2))``
``{"n": {"$in": [1, True]}}``         ``Filter(should=[<n: Range(gte=1, lte=1)>, <n: MatchValue(True)>])``
``{"a.b": 1}``                        key ``'"a.b"'`` (quoted: a dot would mean a nested field)
``{"n": {"$in": []}}``                ``NO_MATCH``: no point can match, Qdrant is not asked
``{"n": {"$gt": 1}}``                 ``InvalidValueError`` (the protocol has ``$in`` only)
====================================  =================================================================

Numbers are matched with a one-value ``Range``, as in Python ``1 == 1.0``
(``MatchValue`` takes no floats and would not match an int with a float);
Qdrant's ranges never match booleans, and ``MatchValue(True)`` matches only
booleans, so ``True`` and ``1`` stay apart as ``matches_filter`` wants.
Integers beyond 2**53 (not exact as a float range) use ``MatchValue``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from qdrant_client import models

from ragkit.errors import InvalidValueError
from ragkit.protocols.vector import in_values, storable_scalar

RESERVED_PREFIX = "_ragkit_"
ID_KEY = "_ragkit_id"
WORKSPACE_KEY = "_ragkit_workspace"
_EXACT_FLOAT_INT = 2**53
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_\-]+$")


class _NoMatch:
    def __repr__(self) -> str:
        return "NO_MATCH"


NO_MATCH: Final = _NoMatch()
"""A filter no stored point can satisfy."""


def storable_key(key: str) -> bool:
    """Keys a filter can address (no ``"``), not empty, not ragkit's own."""
    return bool(key) and '"' not in key and not key.startswith(RESERVED_PREFIX)



def check_metadata(metadata: Sequence[Mapping[str, Any]]) -> None:
    """Reject (before anything is written) what Qdrant would refuse or alter."""
    for meta in metadata:
        for key, value in meta.items():
            if not storable_key(key):
                raise InvalidValueError(
                    f"metadata key {key!r} cannot be stored in Qdrant: keys must be non-empty, "
                    f"without '\"', and must not start with {RESERVED_PREFIX!r} (ragkit's own fields)"
                )
            if not storable_scalar(value):
                raise InvalidValueError(
                    f"metadata {key!r}={value!r} cannot be stored in Qdrant: integers must fit in 64 bits"
                )


def json_key(field: str) -> str:
    """``field`` as a Qdrant key path: quoted unless it is plain letters, digits, ``_``, ``-``."""
    return field if _PLAIN_KEY.fullmatch(field) else f'"{field}"'


def workspace_filter(workspace: str) -> models.Filter:
    from qdrant_client import models
    return models.Filter(must=[_match(WORKSPACE_KEY, workspace)])


def _match(key: str, value: Any) -> models.FieldCondition:
    from qdrant_client import models
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _condition(field: str, cond: Any) -> models.Condition | _NoMatch:
    from qdrant_client import models
    raw = in_values(field, cond) if isinstance(cond, Mapping) else [cond]
    values = list(dict.fromkeys((type(v), v) for v in raw if storable_scalar(v)))
    if not values or not storable_key(field):
        return NO_MATCH
    key = json_key(field)
    strings = [v for t, v in values if t is str]
    parts: list[models.Condition] = []
    if strings:
        match = models.MatchValue(value=strings[0]) if len(strings) == 1 else models.MatchAny(any=strings)
        parts.append(models.FieldCondition(key=key, match=match))
    for t, v in values:
        if t is bool or (t is int and abs(v) > _EXACT_FLOAT_INT):
            parts.append(_match(key, v))
        elif t is not str:
            parts.append(models.FieldCondition(key=key, range=models.Range(gte=v, lte=v)))
    return parts[0] if len(parts) == 1 else models.Filter(should=parts)


def to_filter(filter: Mapping[str, Any] | None, workspace: str) -> models.Filter | _NoMatch:
    """The workspace condition and ``filter``'s conditions, all required (AND);
    ``NO_MATCH`` when nothing can match; ``InvalidValueError`` for malformed filters."""
    from qdrant_client import models
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidValueError(f"filter must be a mapping, got {type(filter).__name__}")
    must: list[models.Condition] = [_match(WORKSPACE_KEY, workspace)]
    nothing = False
    for field, cond in (filter or {}).items():
        condition = _condition(field, cond) if isinstance(field, str) else NO_MATCH
        if condition is NO_MATCH:
            nothing = True  # keep going: a later malformed entry must still raise
        else:
            must.append(condition)  # type: ignore[arg-type]
    return NO_MATCH if nothing else models.Filter(must=must)
