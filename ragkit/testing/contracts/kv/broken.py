"""Deliberately broken KV stores, the kv contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import AsyncIterator
from typing import ClassVar

from ragkit.protocols.base import bypass_template
from ragkit.protocols.kv import encode_record
from ragkit.storage.sqlite_kv import SQLiteKVStore
from ragkit.testing.contracts.base.broken import MissingIdError


# -- defects: the whole contract fails ----------------------------------------


class ReversedBatchKVStore(SQLiteKVStore):
    """``get_many`` returns its results in reverse order of the asked keys
    (a batch read that loses the caller's order, e.g. an unordered ``IN`` query)."""

    name: ClassVar[str] = "broken-reversed-batch"
    defect: ClassVar[str] = "get_many returns records in reverse order of the asked keys"

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        # The hook answers by key, so the defect pairs each key with the record of
        # its mirror position in the asked list.
        found = await super()._get_many(keys)
        return {k: found[m] for k, m in zip(keys, reversed(keys)) if m in found}


class MergingUpsertKVStore(SQLiteKVStore):
    """``upsert`` merges the new record into the stored one (``old | new``)
    instead of replacing it, so fields absent from the new record survive."""

    name: ClassVar[str] = "broken-merging-upsert"
    defect: ClassVar[str] = "upsert merges into the existing record instead of replacing it"

    async def _upsert(self, records: dict[str, str]) -> None:
        old = await super()._get_many(list(records))
        await super()._upsert(
            {k: json.dumps({**json.loads(old[k]), **json.loads(v)}) if k in old else v for k, v in records.items()}
        )


class StrictDeleteKVStore(SQLiteKVStore):
    """``delete`` raises ``MissingIdError`` (a ``KeyError``) when a key is not
    stored, where the protocol says missing keys are ignored."""

    name: ClassVar[str] = "broken-strict-delete"
    defect: ClassVar[str] = "delete raises on a key that is not stored"

    async def _delete(self, keys: list[str]) -> None:
        absent = set(keys) - set(await super()._get_many(keys))
        if absent:
            raise MissingIdError(f"cannot delete missing key(s): {sorted(absent)}")
        await super()._delete(keys)


# -- rule breakers: a test naming the rule fails ------------------------------


def _fold(key: str) -> str:
    return unicodedata.normalize("NFKC", key).casefold().rstrip(" ")


class CaseFoldingKVStore(SQLiteKVStore):
    """Keys are stored case-folded and NFKC-normalised, without trailing
    spaces (a case-insensitive, normalising collation)."""

    violates: ClassVar[str] = "store.keys.exact"
    defect: ClassVar[str] = "keys differing in case/normalisation are one record"

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        found = await super()._get_many(list(dict.fromkeys(map(_fold, keys))))
        return {k: found[_fold(k)] for k in keys if _fold(k) in found}

    async def _upsert(self, records: dict[str, str]) -> None:
        await super()._upsert({_fold(k): v for k, v in records.items()})

    async def _delete(self, ids: list[str]) -> None:
        await super()._delete(list(dict.fromkeys(map(_fold, ids))))


class ParameterLimitKVStore(SQLiteKVStore):
    """Sends every batch as one statement and fails past 999 host
    parameters, as SQLite before 3.32 does ("too many SQL variables")."""

    violates: ClassVar[str] = "store.batch.large"
    defect: ClassVar[str] = "a call with more than 999 keys fails"

    @staticmethod
    def _limit(n: int) -> None:
        if n > 999:
            raise RuntimeError(f"too many SQL variables ({n} > 999)")

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        self._limit(len(keys))
        return await super()._get_many(keys)

    async def _delete(self, ids: list[str]) -> None:
        self._limit(len(ids))
        await super()._delete(ids)


class OffsetScanKVStore(SQLiteKVStore):
    """``keys()`` pages by offset (``LIMIT 100 OFFSET n``): keys deleted behind
    the scan shift the rest and the scan skips them."""

    violates: ClassVar[str] = "store.scan.complete-under-delete"
    defect: ClassVar[str] = "keys() pages by offset and skips keys when others are deleted"

    async def _keys(self) -> AsyncIterator[str]:
        offset = 0
        while True:
            page = sorted([k async for k in super()._keys()])[offset : offset + 100]
            for key in page:
                yield key
            if len(page) < 100:
                return
            offset += 100


class UnfencedKVStore(SQLiteKVStore):
    """Replaces ``upsert`` and forgets to ask the fence: a writer that lost
    the lock still writes through it."""

    violates: ClassVar[str] = "store.fence.checked"
    defect: ClassVar[str] = "upsert writes without asking the fence"

    @bypass_template("the defect: no fence check")
    async def upsert(self, records):  # type: ignore[override]
        self._check_open()
        encoded = {key: encode_record(key, value) for key, value in records.items()}
        if encoded:
            await self._upsert(encoded)


class AppendingTermsKVStore(SQLiteKVStore):
    """An upsert adds the record's new words to its old ones (an index
    written with ``INSERT`` where it needed a replace)."""

    violates: ClassVar[str] = "kv.text.follows-writes"
    defect: ClassVar[str] = "a replaced record is still found by its old words"

    async def _upsert_indexed(self, records: dict[str, str], terms: dict[str, list[str]]) -> None:
        old = await self.select("terms", list(records))
        await super()._upsert_indexed(records, {k: [*(old.get(k) or "").split(), *t] for k, t in terms.items()})


class UnrankedTextKVStore(SQLiteKVStore):
    """Postings count each word once per record, whatever its frequency, and
    every record as one term long (an index that keeps which records hold a
    word, not how often: FTS5's ``detail=none``)."""

    violates: ClassVar[str] = "kv.text.bm25"
    defect: ClassVar[str] = "postings without term frequencies or lengths"

    async def _text_postings(self, words: list[str]) -> list[tuple[str, int, dict[str, int]]]:
        return [(key, 1, dict.fromkeys(counts, 1)) for key, _, counts in await super()._text_postings(words)]


class LatinOnlyTextKVStore(SQLiteKVStore):
    """Indexes words of alphabetic scripts only: Chinese text is never found
    (an engine whose tokenizer drops what it cannot split)."""

    violates: ClassVar[str] = "kv.text.cjk"
    defect: ClassVar[str] = "Chinese words are not indexed"

    async def _upsert_indexed(self, records: dict[str, str], terms: dict[str, list[str]]) -> None:
        await super()._upsert_indexed(records, {k: [w for w in t if w.isascii()] for k, t in terms.items()})


class UnfilledTextKVStore(SQLiteKVStore):
    """Indexes what it writes, never what was stored before its index: a
    database from an older version stays unsearchable."""

    violates: ClassVar[str] = "kv.text.fills"
    defect: ClassVar[str] = "records stored before the text index are never indexed"

    def _fill(self, conn) -> None:  # type: ignore[no-untyped-def]
        return None


class FieldBlindTextKVStore(SQLiteKVStore):
    """Remembers that a namespace was indexed, not for which field: an
    instance given another field searches the old field's words."""

    violates: ClassVar[str] = "kv.text.field-change"
    defect: ClassVar[str] = "a namespace indexed for one field is never indexed for another"

    def _fill(self, conn) -> None:  # type: ignore[no-untyped-def]
        if conn.execute("SELECT 1 FROM kv_text_filled WHERE workspace = ? AND namespace = ?", self._scope).fetchone():
            return
        super()._fill(conn)


DEFECTS: tuple[type, ...] = (ReversedBatchKVStore, MergingUpsertKVStore, StrictDeleteKVStore)

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "KVStoreContract": (CaseFoldingKVStore, ParameterLimitKVStore, OffsetScanKVStore, UnfencedKVStore,
                        AppendingTermsKVStore, UnrankedTextKVStore, LatinOnlyTextKVStore, UnfilledTextKVStore,
                        FieldBlindTextKVStore),
}

REFERENCES: dict[str, type] = {"KVStoreContract": SQLiteKVStore}
