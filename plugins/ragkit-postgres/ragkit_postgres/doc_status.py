"""Document-status store ``postgres``, with the generation and change feed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragkit.protocols.base import Capability
from ragkit.protocols.doc_status import DocStatusStore, StatusRow, decode_status, status_row, transitioned
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit_postgres._db import PostgresStore


@dataclass
class _Pending:
    """What a batch transaction's status writes leave to stamp before its
    commit; called with the batch's connection just before it commits."""

    store: PostgresDocStatusStore
    written: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)

    async def __call__(self, conn: Any) -> None:
        await self.store._stamp_now(conn, self.written, self.gone)


class PostgresDocStatusStore(PostgresStore, DocStatusStore):
    """Status records as JSON text in ``<prefix>_doc_status``, listed by
    keyset pages on ``(status, id)``.

    Every write runs in one transaction with a bump of the namespace's row in
    ``<prefix>_doc_status_gen`` (its row lock orders concurrent writers, so
    ``n`` writes raise it by ``n``); each written row records that generation,
    and a deleted id leaves a tombstone with it in ``<prefix>_doc_status_gone``
    until it is written again: ``changes_since`` is two indexed range reads.

    The bump and the stamping of the rows come last in the write's transaction
    (``_stamp``), so the counter's row lock is held only until the commit; in
    the indexer's batch transaction they run once, just before its commit. The
    batch used to take that lock at its first status write and keep it while it
    wrote everything else, and every other writer of statuses (the extraction
    workers' transitions) waited for the whole batch. Rows are written with
    generation 0 and stamped before the commit, so no reader ever sees a 0:
    rows first, the counter last, in every write (one lock order: no deadlock).
    """

    name: ClassVar[str] = "postgres"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES,
         Capability.GENERATION, Capability.CHANGES}
    )

    async def _bump(self, conn: Any) -> int:
        # Never reset, also by drop(): a counter that restarted could come back
        # to a number a reader kept, for other records.
        return await conn.fetchval(
            f"INSERT INTO {self.table('doc_status_gen')} AS g (workspace, namespace, generation) "
            "VALUES ($1, $2, 1) ON CONFLICT (workspace, namespace) "
            "DO UPDATE SET generation = g.generation + 1 RETURNING generation", *self.scope,
        )

    async def _get(self, ids: list[str]) -> dict[str, str]:
        async with self.read("read status records") as conn:
            rows = await conn.fetch(
                f"SELECT id, data FROM {self.table('doc_status')} WHERE workspace = $1 AND namespace = $2 "
                "AND id = ANY($3::text[])", *self.scope, ids,
            )
        return {r[0]: r[1] for r in rows}

    async def _upsert(self, rows: list[StatusRow]) -> None:
        async with self.write("write status records", {self.table("doc_status"): len(rows)}) as conn:
            await self._write_rows(conn, rows)

    async def _write_rows(self, conn: Any, rows: list[StatusRow]) -> None:
        ids = [r.id for r in rows]
        await conn.execute(
            f"INSERT INTO {self.table('doc_status')} (workspace, namespace, id, status, data, generation) "
            "SELECT $1, $2, i, s, d, 0 FROM unnest($3::text[], $4::text[], $5::text[]) AS t(i, s, d) "
            "ON CONFLICT (workspace, namespace, id) DO UPDATE "
            "SET status = excluded.status, data = excluded.data, generation = 0",
            *self.scope, ids, [r.status.value for r in rows], [r.data for r in rows],
        )
        await conn.execute(
            f"DELETE FROM {self.table('doc_status_gone')} WHERE workspace = $1 AND namespace = $2 "
            "AND id = ANY($3::text[])", *self.scope, ids,
        )
        await self._stamp(conn, written=ids)

    async def _stamp(self, conn: Any, written: list[str] = (), gone: list[str] = ()) -> None:
        """Give the rows just written (and the tombstones just left) the next
        generation: now, or in a batch transaction just before its commit."""
        batch = self.db.batch()
        if batch is None:
            await self._stamp_now(conn, set(written), set(gone))
            return
        pending = batch.before_commit.get(id(self))
        if pending is None:  # the first status write of this batch: stamp once, at the end
            pending = batch.before_commit[id(self)] = _Pending(self)
        pending.written.update(written)
        pending.gone.update(gone)

    async def _stamp_now(self, conn: Any, written: set[str], gone: set[str]) -> None:
        if not written and not gone:
            return
        generation = await self._bump(conn)
        for table, ids in (("doc_status", written), ("doc_status_gone", gone)):
            if ids:  # an id written then deleted in one batch matches in one table only
                await conn.execute(
                    f"UPDATE {self.table(table)} SET generation = $4 WHERE workspace = $1 AND namespace = $2 "
                    "AND id = ANY($3::text[])", *self.scope, sorted(ids), generation,
                )

    async def _delete(self, ids: list[str]) -> None:
        async with self.write("delete status records", {self.table("doc_status"): len(ids)}) as conn:
            await self._remove(conn, "AND id = ANY($3::text[])", ids)

    async def _drop(self) -> None:
        async with self.write("drop") as conn:
            await self._remove(conn, "")

    async def _remove(self, conn: Any, where: str, *args: Any) -> None:
        gone = await conn.fetch(
            f"DELETE FROM {self.table('doc_status')} WHERE workspace = $1 AND namespace = $2 {where} RETURNING id",
            *self.scope, *args,
        )
        if not gone:
            return
        ids = [r[0] for r in gone]
        await conn.execute(
            f"INSERT INTO {self.table('doc_status_gone')} (workspace, namespace, id, generation) "
            "SELECT $1, $2, i, 0 FROM unnest($3::text[]) AS t(i) "
            "ON CONFLICT (workspace, namespace, id) DO UPDATE SET generation = 0",
            *self.scope, ids,
        )
        await self._stamp(conn, gone=ids)

    async def _transition(self, id: str, to: DocStatus, error: str | None) -> DocStatusRecord:
        # One check-and-set: the row stays locked from the read to the write.
        async with self.write("change a document's status") as conn:
            data = await conn.fetchval(
                f"SELECT data FROM {self.table('doc_status')} WHERE workspace = $1 AND namespace = $2 "
                "AND id = $3 FOR UPDATE", *self.scope, id,
            )
            record = None if data is None else decode_status(data)
            updated = transitioned(id, record, to, error)
            await self._write_rows(conn, [status_row(updated)])
        return updated

    async def _counts(self) -> dict[str, int]:
        async with self.read("count documents") as conn:
            rows = await conn.fetch(
                f"SELECT status, count(*) FROM {self.table('doc_status')} WHERE workspace = $1 AND namespace = $2 "
                "GROUP BY status", *self.scope,
            )
        return {r[0]: r[1] for r in rows}

    async def _count(self) -> int:
        return await self.count_rows(self.table("doc_status"))

    async def _list_page(self, status: DocStatus | None, limit: int, after: str | None) -> list[str]:
        # Plain conditions (no "IS NULL OR"), so each is an index range: by
        # (status, id) for one status, by the primary key for all.
        sql = f"SELECT data FROM {self.table('doc_status')} WHERE workspace = $1 AND namespace = $2 AND id > $3 "
        async with self.read("list documents") as conn:
            if status is None:
                rows = await conn.fetch(sql + "ORDER BY id LIMIT $4", *self.scope, after or "", limit)
            else:
                rows = await conn.fetch(sql + "AND status = $5 ORDER BY id LIMIT $4", *self.scope, after or "",
                                        limit, status.value)
        return [r[0] for r in rows]

    async def _generation(self) -> int:
        async with self.read("read the generation") as conn:
            found = await conn.fetchval(
                f"SELECT generation FROM {self.table('doc_status_gen')} WHERE workspace = $1 AND namespace = $2",
                *self.scope,
            )
        return int(found or 0)

    async def _changed_since(self, generation: int) -> tuple[int, list[str]]:
        now = await self._generation()  # first: see _changed_since in the protocol
        async with self.read("read the changes") as conn:
            rows = await conn.fetch(
                f"SELECT id FROM {self.table('doc_status')} WHERE workspace = $1 AND namespace = $2 "
                f"AND generation > $3 UNION SELECT id FROM {self.table('doc_status_gone')} "
                "WHERE workspace = $1 AND namespace = $2 AND generation > $3", *self.scope, generation,
            )
        return now, [r[0] for r in rows]
