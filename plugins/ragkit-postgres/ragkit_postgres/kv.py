"""KV store ``postgres``: one row per record, its JSON text as given.

Text search (``Capability.TEXT_SEARCH``): a record's terms are a ``jsonb``
object ``{term: count}`` in its own row, written by the same statement, with
a GIN index; the postings of a question's words are the rows holding any of
them (``?|``), each with its counts of those words and its number of terms.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import ClassVar

from ragkit import lexical
from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore
from ragkit_postgres._db import PostgresStore

_FILL_PAGE = 1000


class PostgresKVStore(PostgresStore, KVStore):
    """Records in ``<prefix>_kv``; a batch is one statement (arrays, so no
    parameter limit) in one transaction."""

    name: ClassVar[str] = "postgres"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES, Capability.TEXT_SEARCH}
    )

    async def _open(self) -> None:
        await super()._open()
        if self.indexes_text:
            await self._fill()

    async def _fill(self) -> None:
        """Give every record of this namespace its terms, once per field: rows
        written before version 2, or by a store given no text field."""
        field, kv = self.config.text_field, self.table("kv")
        async with self.read("read the text index's state") as conn:
            filled = await conn.fetchval(
                f"SELECT field FROM {self.table('kv_text_filled')} WHERE workspace = $1 AND namespace = $2", *self.scope)
        if filled == field:
            return
        sql = (f"SELECT key, value FROM {kv} WHERE workspace = $1 AND namespace = $2 AND key > $3 "
               "ORDER BY key LIMIT $4")
        page: dict[str, str] = {}
        async for key, value in self.pages(sql, *self.scope, size=_FILL_PAGE):
            page[key] = value
            if len(page) == _FILL_PAGE:
                await self._set_terms(page, field)
                page = {}
        await self._set_terms(page, field)
        async with self.write("record the text index's state") as conn:
            await conn.execute(
                f"INSERT INTO {self.table('kv_text_filled')} (workspace, namespace, field) VALUES ($1, $2, $3) "
                "ON CONFLICT (workspace, namespace) DO UPDATE SET field = excluded.field", *self.scope, field)

    async def _set_terms(self, page: dict[str, str], field: str | None) -> None:
        if not page:
            return
        terms = {k: lexical.terms(json.loads(v).get(field)) for k, v in page.items()}
        # Only where the record is still the one read: a writer that replaced
        # it meanwhile wrote its terms with it, and those stay.
        async with self.write("index records' words", {self.table("kv"): len(page)}) as conn:
            await conn.execute(
                f"UPDATE {self.table('kv')} AS kv SET terms = t.terms::jsonb, term_count = t.n "
                "FROM unnest($3::text[], $4::text[], $5::text[], $6::int[]) AS t(k, v, terms, n) "
                "WHERE kv.workspace = $1 AND kv.namespace = $2 AND kv.key = t.k AND kv.value = t.v",
                *self.scope, list(terms), list(page.values()), [_counts(t) for t in terms.values()],
                [len(t) for t in terms.values()],
            )

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        async with self.read("read records") as conn:
            rows = await conn.fetch(
                f"SELECT key, value FROM {self.table('kv')} WHERE workspace = $1 AND namespace = $2 "
                "AND key = ANY($3::text[])", *self.scope, keys,
            )
        return {r[0]: r[1] for r in rows}

    async def _upsert(self, records: dict[str, str]) -> None:
        await self._write(records, [None] * len(records), [None] * len(records), unfill=True)

    async def _upsert_indexed(self, records: dict[str, str], terms: dict[str, list[str]]) -> None:
        await self._write(records, [_counts(terms[k]) for k in records], [len(terms[k]) for k in records])

    async def _write(
        self, records: dict[str, str], terms: list[str | None], counts: list[int | None], *, unfill: bool = False
    ) -> None:
        # The terms are replaced with the record (NULL from a store given no
        # text field): a record's old words never outlive it.
        async with self.write("write records", {self.table("kv"): len(records)}) as conn:
            await conn.execute(
                f"INSERT INTO {self.table('kv')} (workspace, namespace, key, value, terms, term_count) "
                "SELECT $1, $2, k, v, t::jsonb, n FROM unnest($3::text[], $4::text[], $5::text[], $6::int[]) "
                "AS r(k, v, t, n) ON CONFLICT (workspace, namespace, key) DO UPDATE SET value = excluded.value, "
                "terms = excluded.terms, term_count = excluded.term_count",
                *self.scope, list(records), list(records.values()), terms, counts,
            )
            if unfill:
                # Rows without terms: if the namespace was indexed, the next
                # indexed open must fill it again ([kv.text.fills]).
                await conn.execute(
                    f"DELETE FROM {self.table('kv_text_filled')} WHERE workspace = $1 AND namespace = $2", *self.scope)

    async def _text_postings(self, words: list[str]) -> list[tuple[str, int, dict[str, int]]]:
        async with self.read("search records' words") as conn:
            rows = await conn.fetch(
                f"SELECT key, term_count, ARRAY(SELECT coalesce((terms ->> w)::int, 0) FROM unnest($3::text[]) AS w) "
                f"FROM {self.table('kv')} WHERE workspace = $1 AND namespace = $2 "
                "AND terms IS NOT NULL AND terms ?| $3::text[]", *self.scope, words,
            )
        return [(key, n, {w: c for w, c in zip(words, counts) if c}) for key, n, counts in rows]

    async def _delete(self, ids: list[str]) -> None:
        await self.delete_keys(self.table("kv"), "key", ids)

    async def _count(self) -> int:
        return await self.count_rows(self.table("kv"))

    def _keys(self) -> AsyncIterator[str]:
        return self.scan_keys(self.table("kv"), "key")

    async def _drop(self) -> None:
        async with self.write("drop") as conn:
            await conn.execute(f"DELETE FROM {self.table('kv')} WHERE workspace = $1 AND namespace = $2", *self.scope)


def _counts(terms: list[str]) -> str:
    return json.dumps(Counter(terms), ensure_ascii=False)
