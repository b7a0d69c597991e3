"""Key-value store protocol."""

from __future__ import annotations

import asyncio
import copy
import json
from abc import abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ragkit.errors import InvalidValueError
from ragkit.protocols.base import KeyedStore, distinct, in_order, storable_key, template, unique_keys


class KVStore(KeyedStore):
    """Namespaced records: ``str`` key -> JSON object (``dict``).

    Semantics every adapter must follow (the contract suite checks each):

    - [kv.values.json] Keys are non-empty ``str``; values are ``dict`` objects
      that survive a JSON round trip (str, int, float, bool, None, lists and
      dicts of those) and come back with the same types (``1`` stays an int,
      ``1.0`` a float). Anything else raises ``InvalidValueError`` before
      anything is written.
    - [kv.get-many.order] ``get_many(keys)`` returns one entry per asked key, in
      the asked order (duplicates included), ``None`` for a missing key.
    - [kv.copies] Returned records are copies: mutating one does not change the
      store, and the store never keeps a reference to the caller's dicts.
    - [kv.upsert.replaces] ``upsert`` *replaces* each record whole (no merge
      with the old one); upserting the same mapping twice leaves the store as
      after once.
    - [store.delete.missing-ok] ``delete`` ignores keys that do not exist.
    - [kv.missing] ``missing(keys)`` is the set of asked keys that are not stored.
    - [kv.keys.once] ``keys()`` yields every key once, in no particular order;
      [store.scan.complete-under-delete] holds for it.
    - [kv.unicode-and-size] Unicode (CJK, emoji) in keys and values and values
      of several MB round-trip unchanged.
    - [store.keys.exact] and [store.batch.large] hold for every method taking keys.

    Adapters implement the hooks ``_get_many``, ``_upsert``, ``_delete``,
    ``_count``, ``_keys`` and ``_drop`` (and the lifecycle hooks they need); the
    public methods check the store is open and validate before calling them.
    """

    @template("_get_many")
    async def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """Records for ``keys``, same order, ``None`` where missing."""
        self._check_open()
        keys = list(keys)
        wanted = unique_keys(keys)
        found = await self._get_many(wanted) if wanted else {}
        # Decoded (or copied) per asked position: a key asked twice gives two dicts.
        if _large_text(found):
            # Decoding megabytes of records is pure work: in a worker thread, the
            # event loop serves meanwhile (one json.loads per record, so the GIL
            # changes hands between two); the texts are this call's own.
            return await asyncio.to_thread(in_order, keys, found, _fresh)
        return in_order(keys, found, _fresh)

    @template("_upsert")
    async def upsert(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        """Insert or replace each record."""
        self._check_open()
        if not isinstance(records, Mapping):
            raise InvalidValueError(
                f"upsert takes a mapping of key -> record, got {type(records).__name__}"
            )
        # The whole batch is validated and serialised before anything is written.
        encoded = {key: encode_record(key, value) for key, value in records.items()}
        if encoded:
            await self._fenced()
            await self._upsert(encoded)

    @template("_keys")
    def keys(self) -> AsyncIterator[str]:
        """Every key once, any order."""
        self._check_open()
        return self._while_open(self._keys())

    @template("_get_many")
    async def get(self, key: str) -> dict[str, Any] | None:
        return (await self.get_many([key]))[0]

    @template("_get_many")
    async def missing(self, keys: Iterable[str]) -> set[str]:
        asked = distinct(keys)
        found = await self.get_many(asked)
        return {k for k, v in zip(asked, found) if v is None}

    # -- hooks ----------------------------------------------------------------------

    @abstractmethod
    async def _get_many(self, keys: list[str]) -> Mapping[str, str | bytes | dict[str, Any]]:
        """The stored records among ``keys`` (distinct, storable), missing ones
        left out: each as its JSON text (as ``_upsert`` got it), or as a dict."""

    @abstractmethod
    async def _upsert(self, records: dict[str, str]) -> None:
        """Write every record, given as key -> JSON text from ``encode_record``."""

    @abstractmethod
    def _keys(self) -> AsyncIterator[str]:
        """Every key once, any order (an async generator)."""


DECODE_IN_THREAD = 1 << 16
"""Characters of JSON text from which ``get_many`` decodes in a worker thread."""


def _large_text(found: Mapping[str, str | bytes | dict[str, Any]]) -> bool:
    size = 0
    for value in found.values():
        if isinstance(value, dict):  # a live dict of the backend's: copied on the loop
            return False
        size += len(value)
    return size >= DECODE_IN_THREAD


def _fresh(value: str | bytes | dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(value) if isinstance(value, dict) else json.loads(value)


def encode_record(key: object, value: object) -> str:
    """Validate one record and return its JSON text; shared by adapters so that
    every backend accepts and rejects exactly the same values."""
    if not storable_key(key):
        raise InvalidValueError(
            f"KV keys must be non-empty strings of valid Unicode, got {key!r}"
        )
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
