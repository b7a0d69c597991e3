"""Key-value store protocol."""

from __future__ import annotations

import asyncio
import copy
import json
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

from ragkit import lexical
from ragkit.errors import ConfigError, InvalidValueError
from ragkit.protocols.base import (
    Capability,
    KeyedStore,
    distinct,
    in_order,
    storable_key,
    template,
    unique_keys,
)


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

    With ``Capability.TEXT_SEARCH`` and a ``text_field`` in its config, a store
    also ranks its records by the words of that field (``search_text``). The
    words are the base class's (``ragkit.lexical``), so every backend
    indexes the same terms; the adapter keeps them with the record and ranks:

    - [kv.text.finds] ``search_text(question, top_k)`` returns ``(key, score)``
      of the records sharing a term with the question, at most ``top_k``,
      best first (a higher score is better; equal scores in key order); a
      record sharing none is not returned, nor is a record whose field is
      missing or not a string (it is stored all the same).
    - [kv.text.bm25] The base class scores by BM25 from the adapter's
      postings (``_text_postings``), so they must be exact: every record
      holding a word, each once, with how often it holds each word and its
      number of terms. A record holding more of the question's terms, or
      rarer ones, then ranks higher, identically on every backend.
    - [kv.text.follows-writes] A record's terms are written in the same
      transaction as the record: an upsert replaces them (its old words no
      longer find it), ``delete`` and ``drop`` remove them, and what is found
      is always a stored record of this workspace and namespace.
    - [kv.text.cjk] Chinese text is searchable by the words of a question
      written without spaces.
    - [kv.text.fills] Records stored before the namespace had a text index
      (by an older version, or an instance given no ``text_field``) get their
      terms when an instance given one first opens over them; so do records
      an instance given no ``text_field`` writes into an indexed namespace,
      at the next indexed open.
    - [kv.text.field-change] A namespace opened by an instance given another
      ``text_field`` than the one it was indexed for is searched by the new
      field's words only (its records get their terms again).

    Adapters implement the hooks ``_get_many``, ``_upsert``, ``_delete``,
    ``_count``, ``_keys`` and ``_drop`` (and the lifecycle hooks they need); the
    public methods check the store is open and validate before calling them.
    With ``TEXT_SEARCH`` also ``_upsert_indexed`` and ``_text_postings``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if Capability.TEXT_SEARCH in cls.capabilities and not getattr(cls, "__abstractmethods__", None):
            for hook in ("_upsert_indexed", "_text_postings"):
                if getattr(cls, hook) is getattr(KVStore, hook):
                    raise TypeError(f"{cls.__qualname__} declares Capability.TEXT_SEARCH: implement {hook}")

    @property
    def indexes_text(self) -> bool:
        """Whether this store keeps its records' terms: it can, and was given a field."""
        return Capability.TEXT_SEARCH in self.capabilities and self.config.text_field is not None

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
        if not encoded:
            return
        await self._fenced()
        if self.indexes_text:
            await self._upsert_indexed(encoded, await self._terms(records))
        else:
            await self._upsert(encoded)

    async def _terms(self, records: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
        """Each record's search terms. A batch of chunks is a few milliseconds
        a thousand words (jieba's more): in a worker thread past
        ``TERMS_IN_THREAD`` characters, so the loop serves meanwhile."""
        field = self.config.text_field
        texts = {k: v.get(field) for k, v in records.items()}
        size = sum(len(t) for t in texts.values() if isinstance(t, str))
        if size < TERMS_IN_THREAD:
            return {k: lexical.terms(t) for k, t in texts.items()}
        return await asyncio.to_thread(lambda: {k: lexical.terms(t) for k, t in texts.items()})

    @template("_text_postings")
    async def search_text(
        self, question: str, top_k: int, *, within: Callable[[str], bool] | None = None,
        population: int | None = None,
    ) -> list[tuple[str, float]]:
        """``(key, score)`` of the records whose text field best matches
        ``question``'s words, best first, at most ``top_k`` (BM25, ``lexical.bm25``).

        ``within``: only the records it keeps count, and they are scored as an
        index of those records alone would score them (term rarity among
        them, ``population`` of them): a scoped query's order tells nothing
        of the records it may not read. ``population``: how many records
        ``within`` keeps (by default, how many of them match)."""
        self._check_open()
        if not self.indexes_text:
            raise ConfigError(
                f"{type(self).__name__} (namespace {self.namespace!r}) has no text index: "
                + ("it was given no text_field" if Capability.TEXT_SEARCH in self.capabilities
                   else "the adapter does not declare Capability.TEXT_SEARCH; use one that does (sqlite)")
            )
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
            raise InvalidValueError(f"top_k must be a whole number >= 0, got {top_k!r}")
        words = lexical.query_terms(question)[: lexical.MAX_QUERY_TERMS]
        if not words or top_k == 0:
            return []
        postings = await self._text_postings(words)
        if within is not None:
            postings = [p for p in postings if within(p[0])]
        if population is None:
            population = await self.count() if within is None else len(postings)
        if len(postings) >= BM25_IN_THREAD:
            # Thousands of postings (a common word at 100k records) are tens of
            # milliseconds of pure work: in a worker thread, the loop serves meanwhile.
            return await asyncio.to_thread(lexical.bm25, postings, population, top_k)
        return lexical.bm25(postings, population, top_k)

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

    async def _upsert_indexed(self, records: dict[str, str], terms: dict[str, list[str]]) -> None:
        """``TEXT_SEARCH`` stores given a ``text_field``: as ``_upsert``, and in
        the same transaction replace each record's terms with ``terms[key]``
        (``[]``: nothing to find it by). Terms are runs of letters and digits
        (``lexical.TERM``), repeated as often as the text has them."""
        raise NotImplementedError

    async def _text_postings(self, words: list[str]) -> list[tuple[str, int, dict[str, int]]]:
        """``TEXT_SEARCH`` stores: ``(key, its number of terms, {word: times
        it holds it})`` of every record holding any of ``words`` (distinct
        terms), each record once, counting only the words it holds."""
        raise NotImplementedError


TERMS_IN_THREAD = 1 << 15
"""Characters of text from which ``upsert`` makes the terms in a worker thread."""

BM25_IN_THREAD = 2000
"""Postings from which ``search_text`` scores in a worker thread."""

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
