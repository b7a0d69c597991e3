"""Vector store ``postgres``: pgvector, cosine distance, an HNSW index."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import numpy as np

from ragkit.protocols.base import Capability
from ragkit.protocols.vector import Filter, VectorStore, in_values, search_past_ties
from ragkit.schema import JSONScalar, VectorHit
from ragkit_postgres._db import HALFVEC_ABOVE, PostgresStore, safe_dsn

ROW_COUNT_AGE_S = 60.0
"""How long a vector store trusts its row count (``PostgresVectorStore._small``)."""


def vector_text(row: np.ndarray) -> str:
    """pgvector's text form; ``repr`` of each float32 value reads back exactly."""
    return "[" + ",".join(map(repr, np.asarray(row, dtype=np.float32).tolist())) + "]"


def parse_vector(text: str) -> list[float]:
    return np.asarray(json.loads(text), dtype=np.float32).tolist()


class PostgresVectorStore(PostgresStore, VectorStore):
    """Vectors of one dimension share ``<prefix>_vectors_<dim>`` (rows keyed by
    workspace, namespace and id) and its HNSW index (``vector_cosine_ops``; on
    ``halfvec`` above 2,000 dimensions, the index's limit for ``vector``, while
    scores are computed on the full-precision column). Metadata filters are SQL
    on a jsonb copy of the metadata (jsonb equality: numbers by value, a string
    never equals a number, a bool only a bool). The dimension and embedder of
    each store are recorded in ``<prefix>_vector_stores``.
    """

    name: ClassVar[str] = "postgres"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES,
         Capability.METADATA_FILTER, Capability.APPROXIMATE_SEARCH}
    )

    def where(self) -> str:
        return f"vector store {self.workspace}/{self.namespace} in PostgreSQL {safe_dsn(self.options.dsn)}"

    async def _open(self) -> None:
        await super()._open()
        try:
            async with self.read("read the vector store's embedder") as conn:
                row = await conn.fetchrow(
                    f"SELECT dimension, embedder FROM {self.table('vector_stores')} "
                    "WHERE workspace = $1 AND namespace = $2", *self.scope,
                )
            dimension = self.dimension if row is None else row[0]
            self.stored_embedder = self.config.embedder if row is None else row[1]
            self.stored_dimension = None if dimension == self.dimension else dimension
            self.vectors = await self.db.vector_table(dimension)
            # The search breadth, and (pgvector 0.8+) scanning on until enough
            # rows match: the index holds every workspace and namespace of this
            # dimension, so even without a metadata filter the nearest rows may
            # be others'.
            self._settings = {"hnsw.ef_search": str(self.options.hnsw_ef_search)}
            if self.db.vector_version >= (0, 8):
                self._settings["hnsw.iterative_scan"] = "strict_order"
            self._rows: tuple[int, float] | None = None  # (rows counted up to exact_search_below, when)
        except BaseException:
            await super()._close()
            raise

    async def _upsert(self, ids: list[str], vectors: np.ndarray, metadata: list[dict[str, JSONScalar]]) -> None:
        self._rows = None
        texts = [json.dumps(m, ensure_ascii=False, allow_nan=False) for m in metadata]
        async with self.write("write vectors", {self.vectors: len(ids)}) as conn:
            await conn.execute(
                f"INSERT INTO {self.table('vector_stores')} (workspace, namespace, dimension, embedder) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT (workspace, namespace) DO NOTHING",
                *self.scope, self.dimension, self.config.embedder,
            )
            await conn.execute(
                f"INSERT INTO {self.vectors} (workspace, namespace, id, embedding, metadata, attributes) "
                "SELECT $1, $2, i, e::vector, m, m::jsonb FROM unnest($3::text[], $4::text[], $5::text[]) AS t(i, e, m) "
                "ON CONFLICT (workspace, namespace, id) DO UPDATE SET embedding = excluded.embedding, "
                "metadata = excluded.metadata, attributes = excluded.attributes",
                *self.scope, ids, [vector_text(v) for v in vectors], texts,
            )

    async def _query(self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None) -> list[VectorHit]:
        args: list[Any] = [*self.scope, vector_text(unit)]
        where = ""
        for field, cond in (filter or {}).items():
            values = in_values(field, cond) if isinstance(cond, dict) else [cond]
            args += [field, [json.dumps(v) for v in values]]
            where += f" AND (attributes -> ${len(args) - 1}) = ANY(${len(args)}::jsonb[])"
        limit = f"${len(args) + 1}"
        sql = self._exact_sql(where, limit) if await self._small() else self._search_sql(where, limit)

        async def search(n: int) -> list[VectorHit]:
            async with self.db.errors("search vectors"), self.db.configured(self._settings) as conn:
                rows = await conn.fetch(sql, *args, n)
            return [VectorHit(id=r[0], score=min(1.0, max(-1.0, float(r[1]))), metadata=json.loads(r[2]))
                    for r in rows]

        return await search_past_ties(search, top_k, min_score)

    async def _small(self) -> bool:
        """Whether the store holds fewer rows than ``exact_search_below``.

        Why: the HNSW index is shared with every store of the dimension, so
        the walk for a small store passes mostly other stores' rows; scoring
        all of its own rows costs less up to a few thousand (measured at ×1 of
        the benchmark: 1,890 chunks beside 35,000 entity and relation rows,
        1.4 ms exact against 2.3 ms walked; 38 ms exact at 19,000 rows). The
        count is kept for a minute, and forgotten on this process's writes
        (another process's only age it out: a stale count only picks the
        slower of two right answers)."""
        below = self.options.exact_search_below
        if below <= 0:
            return False
        now = time.monotonic()
        if self._rows is None or now - self._rows[1] > ROW_COUNT_AGE_S:
            # Counted up to the threshold only: a store of millions of rows
            # costs no more to classify than one at the threshold.
            async with self.read("count vectors") as conn:
                rows = await conn.fetchval(
                    f"SELECT count(*) FROM (SELECT 1 FROM {self.vectors} WHERE workspace = $1 AND namespace = $2 "
                    "LIMIT $3) AS s", *self.scope, below,
                )
            self._rows = (rows, now)
        return self._rows[0] < below

    def _exact_sql(self, where: str, limit: str) -> str:
        """Every row of this store matching ``where`` scored, the nearest
        ``limit`` kept (``+ 0`` keeps the ordering off the index)."""
        return (f"SELECT id, 1 - (embedding <=> $3::vector), metadata FROM {self.vectors} "
                f"WHERE workspace = $1 AND namespace = $2{where} ORDER BY (embedding <=> $3::vector) + 0 LIMIT {limit}")

    def _search_sql(self, where: str, limit: str) -> str:
        """The nearest ``limit`` rows of this store matching ``where``, in one
        statement: the HNSW walk, and only when it brings back fewer rows than
        asked the exact answer (every row of the store that matches, sorted).

        Why the second branch: the index holds every workspace and namespace of
        this dimension, so a small store, or a selective filter, is a handful of
        rows scattered in a large graph. The walk (iterative scan included) may
        stop before it meets them all, at ``hnsw.max_scan_tuples`` or at parts
        of the graph deleted rows cut off, and ``search_past_ties`` takes fewer
        rows than asked for "every row that matches". The exact branch runs
        only then (its gate is evaluated once, before it) and costs a scan of
        this store's matching rows.
        """
        d = self.stored_dimension or self.dimension
        walk = f"(embedding::halfvec({d}) <=> $3::halfvec({d}))" if d > HALFVEC_ABOVE else "(embedding <=> $3::vector)"
        rows = f"FROM {self.vectors} WHERE workspace = $1 AND namespace = $2{where}"
        return (
            f"WITH walk AS MATERIALIZED (SELECT id, embedding <=> $3::vector AS distance, metadata {rows} "
            f"ORDER BY {walk} LIMIT {limit}) "
            f"SELECT id, 1 - distance, metadata FROM walk WHERE (SELECT count(*) FROM walk) >= {limit} "
            f"UNION ALL ({self._exact_sql(f'{where} AND (SELECT count(*) FROM walk) < {limit}', limit)})"
        )

    async def _get(self, ids: list[str]) -> dict[str, tuple[Any, dict[str, Any]]]:
        async with self.read("read vectors") as conn:
            rows = await conn.fetch(
                f"SELECT id, embedding::text, metadata FROM {self.vectors} WHERE workspace = $1 AND namespace = $2 "
                "AND id = ANY($3::text[])", *self.scope, ids,
            )
        return {r[0]: (parse_vector(r[1]), json.loads(r[2])) for r in rows}

    async def _records(self, batch: int) -> AsyncIterator[dict[str, tuple[Any, dict[str, Any]]]]:
        # One keyset page per statement (``id > last``, an index range), vectors
        # included: never an OFFSET, which re-reads every row before the page.
        sql = (f"SELECT id, embedding::text, metadata FROM {self.vectors} WHERE workspace = $1 AND namespace = $2 "
               "AND id > $3 ORDER BY id LIMIT $4")
        page: dict[str, tuple[Any, dict[str, Any]]] = {}
        async for row in self.pages(sql, *self.scope, size=batch):
            page[row[0]] = (parse_vector(row[1]), json.loads(row[2]))
            if len(page) == batch:
                yield page
                page = {}
        if page:
            yield page

    async def _delete(self, ids: list[str]) -> None:
        self._rows = None
        await self.delete_keys(self.vectors, "id", ids)

    async def _count(self) -> int:
        return await self.count_rows(self.vectors)

    def _ids(self) -> AsyncIterator[str]:
        return self.scan_keys(self.vectors, "id")

    async def _drop(self) -> None:
        self._rows = None
        async with self.write("drop") as conn:
            await conn.execute(f"DELETE FROM {self.vectors} WHERE workspace = $1 AND namespace = $2", *self.scope)
            await conn.execute(
                f"DELETE FROM {self.table('vector_stores')} WHERE workspace = $1 AND namespace = $2", *self.scope
            )
        # Empty now: the configured embedder's vectors are welcome.
        self.vectors = await self.db.vector_table(self.dimension)
        self.stored_dimension, self.stored_embedder = None, self.config.embedder
