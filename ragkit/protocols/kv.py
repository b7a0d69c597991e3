"""Key-value store protocol."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import BaseStore


class KVStore(BaseStore, ABC):
    """Namespaced records: ``str`` key -> JSON object (``dict``).

    Semantics every adapter must follow (the contract suite checks each):

    - Keys are non-empty ``str``; values are ``dict`` objects that survive a JSON
      round trip (str, int, float, bool, None, lists and dicts of those). Anything
      else raises ``InvalidValueError`` before anything is written.
    - ``get_many(keys)`` returns one entry per asked key, in the asked order
      (duplicates included), ``None`` for a missing key.
    - Returned records are copies: mutating one does not change the store, and
      the store never keeps a reference to the caller's dicts.
    - ``upsert`` *replaces* each record whole (no merge with the old one);
      upserting the same mapping twice leaves the store as after once.
    - ``delete`` ignores keys that do not exist.
    - ``missing(keys)`` is the set of asked keys that are not stored.
    - ``keys()`` yields every key once, in no particular order.
    - Unicode (CJK, emoji) in keys and values and values of several MB round-trip
      unchanged.
    """

    @abstractmethod
    async def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """Records for ``keys``, same order, ``None`` where missing."""

    @abstractmethod
    async def upsert(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        """Insert or replace each record."""

    @abstractmethod
    async def delete(self, keys: Iterable[str]) -> None:
        """Remove these keys; missing keys are not an error."""

    @abstractmethod
    async def count(self) -> int:
        """Number of records in this namespace and workspace."""

    @abstractmethod
    def keys(self) -> AsyncIterator[str]:
        """Every key once, any order."""

    @abstractmethod
    async def drop(self) -> None:
        """Delete every record of this namespace and workspace."""

    async def get(self, key: str) -> dict[str, Any] | None:
        return (await self.get_many([key]))[0]

    async def missing(self, keys: Iterable[str]) -> set[str]:
        asked = list(dict.fromkeys(keys))
        found = await self.get_many(asked)
        return {k for k, v in zip(asked, found) if v is None}


def encode_record(key: object, value: object) -> str:
    """Validate one record and return its JSON text; shared by adapters so that
    every backend accepts and rejects exactly the same values."""
    if not isinstance(key, str) or not key:
        raise InvalidValueError(f"KV keys must be non-empty strings, got {key!r}")
    if not isinstance(value, Mapping):
        raise InvalidValueError(
            f"KV value for {key!r} must be a dict, got {type(value).__name__}"
        )
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # lone surrogates cannot be stored as UTF-8
        # Tuples and non-string dict keys serialise but come back changed.
        if json.loads(text) != value:
            raise ValueError("it would not read back unchanged (tuples or non-string keys?)")
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(
            f"KV value for {key!r} is not storable as JSON ({exc}); "
            "store only str, int, float, bool, None, lists and dicts with string keys"
        ) from exc
    return text
