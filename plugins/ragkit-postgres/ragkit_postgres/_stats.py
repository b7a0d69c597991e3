"""Planner statistics kept up with bulk writes.

PostgreSQL plans from the statistics ``ANALYZE`` gathers, and autovacuum
gathers them only after its nap (a minute) and its queue. Right after an
indexing run the tables have grown many times over since they were last
analysed, or were never analysed: the planner then guesses a handful of rows
per workspace and namespace and answers a vector search by reading and sorting
every row of the namespace (a bitmap scan, measured 30-60 ms at 19k entities)
instead of walking the HNSW index (2-8 ms). So the stores count the rows they
write, and once a table has doubled since it was last analysed (and by at
least ``MIN_ROWS``) the database analyses it after the write commits. Doubling
keeps the cost small: a table grown from nothing to N rows is analysed about
log2(N / MIN_ROWS) times, each a sample of at most 30,000 rows (tens of ms).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

log = logging.getLogger(__name__)

MIN_ROWS = 1000
"""Rows written since the last analysis below which a table is left to autovacuum."""


class Statistics:
    """Rows written per table since its last analysis, and the analysis when
    they are as many as the table held then (``pg_class.reltuples``)."""

    def __init__(self) -> None:
        self.written: Counter[str] = Counter()
        self.analysed_rows: dict[str, float] = {}
        """Rows each table held at its last analysis, read once per table (then kept here)."""
        self._lock = asyncio.Lock()

    def wrote(self, table: str, rows: int) -> None:
        """``rows`` inserted, updated or deleted in ``table`` (a table name from
        the validated prefix, never user input)."""
        self.written[table] += rows

    def _due(self) -> list[str]:
        """Tables written enough to have doubled, or whose size is not read yet;
        decided here, so that a commit with nothing due takes no connection."""
        return [t for t, n in self.written.items() if n >= MIN_ROWS and n >= self.analysed_rows.get(t, 0.0)]

    async def refresh(self, pool: Any) -> None:
        """Analyse every table written enough to have doubled; called after a
        write has committed. A failure is logged, never raised: the write it
        follows has already committed, and autovacuum will analyse the table
        in its own time."""
        if not self._due():
            return
        async with self._lock:
            due = self._due()
            if not due:
                return
            try:
                async with pool.acquire() as conn:
                    for table in due:
                        await self._analyse_if_doubled(conn, table)
            except Exception as exc:  # noqa: BLE001 - see the docstring
                log.warning("could not refresh the planner statistics of %s: %s", ", ".join(due), exc)

    async def _analyse_if_doubled(self, conn: Any, table: str) -> None:
        if table not in self.analysed_rows:
            self.analysed_rows[table] = await _rows(conn, table)
        if self.written[table] < self.analysed_rows[table]:
            return
        self.written[table] = 0
        # SKIP_LOCKED: a table autovacuum is analysing already gets fresh statistics.
        await conn.execute(f"ANALYZE (SKIP_LOCKED) {table}")
        self.analysed_rows[table] = await _rows(conn, table)


async def _rows(conn: Any, table: str) -> float:
    """The table's row count as of its last analysis or vacuum (0 if never)."""
    return max(0.0, await conn.fetchval("SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)", table) or 0.0)
