"""An embedded vector store for large workspaces: the vectors, their ids and
metadata in the workspace's SQLite file, and in memory only an HNSW graph
over 8-bit copies of the vectors (usearch).

Why: the ``numpy`` store holds every vector as float32 in memory, a Python
dict of metadata per row, and scans every vector per query. At the scale
benchmark's ×10 (about 190,000 entity and 165,000 relation vectors) that was
most of its 2 GB, and a graph-mode query spent most of its 54 ms scanning
(``benchmarks/findings.md``). Here memory holds one byte per dimension and
the graph's links per vector, and a query visits a few hundred of them.

Search: the HNSW graph gives candidates, twice ``top_k`` and more (below
``exact_rows`` a scan of every 8-bit vector gives them). Each candidate is
scored again from its float32 vector in SQLite, so a hit's score is the exact
cosine ([vector.scores.cosine]); what is approximate is only which records are
found (``Capability.APPROXIMATE_SEARCH``). A filtered query reads every row of
the namespace and scores it exactly: no pipeline stage filters, and a graph
search would miss the few rows a narrow filter keeps.

Tables, in ``<working_dir>/<workspace>/ragkit.sqlite`` beside the others:

- ``vectors(workspace, namespace, id, key, seq, vector, metadata)``: ``id``
  as UTF-8 bytes, ``key`` the record's
  number in the graph (kept when it is replaced, never reused), ``vector``
  float32 little-endian, ``metadata`` JSON;
- ``vectors_gone(workspace, namespace, key, seq)``: the keys deleted;
- ``vectors_state(workspace, namespace, seq, floor, next_key, dimension,
  embedder, epoch)``.

Every write is one transaction that takes the next ``seq``: each row it
writes carries it, and each key it deletes is recorded with it. The graph in
memory knows the ``seq`` it reflects, and before every search it reads the
rows and deletions after that one (a single ``SELECT`` when there are none),
so the writes of another instance or process are seen. A ``drop`` raises
``floor``: a graph older than it is built again from the rows.

The graph is saved in ``vectors/`` beside the other files of the workspace
(``<namespace>.<epoch>-<seq>.usearch``, named by ``<namespace>.usearch.json``)
when the store closes after changing it, and loaded at the next open, then
brought up to date; a missing or foreign file is built again from the rows.
It is a cache: deleting it loses nothing.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from ragkit.protocols.base import Capability
from ragkit.protocols.vector import Filter, VectorStore, matches_filter, search_past_ties, unit_rows
from ragkit.schema import JSONScalar, VectorHit
from ragkit.storage._sqlite import SQLiteOptions, SQLiteStore, chunked
from ragkit.storage._sqlite import json_bytes as _dumps
from ragkit.storage._sqlite import json_value as _loads
from ragkit.storage._sqlite import key_bytes as _id
from ragkit.storage._sqlite import key_text as _str

PAGE = 10_000
"""Rows read per statement when the graph is built or brought up to date."""


def _usearch() -> Any:
    """usearch's ``Index``, imported when a store first needs its graph: its
    native module takes 0.2 s to load, which no other command should pay."""
    from usearch.index import Index

    return Index


class USearchOptions(SQLiteOptions):
    """``[vector.options]`` of the ``usearch`` store."""

    exact_rows: int = Field(20_000, ge=0)
    """Up to this many vectors, candidates come from a scan of all the 8-bit
    vectors instead of the graph: exact but for the rounding to 8 bits, and
    as fast as the graph at this size."""
    connectivity: int = Field(16, ge=2, le=64)
    """Links per vector in the graph (HNSW's M): memory against recall."""
    expansion_add: int = Field(64, ge=2)
    """Candidates weighed when a vector is linked in (efConstruction): indexing time against recall."""
    expansion_search: int = Field(128, ge=2)
    """Candidates visited per search (ef): query time against recall. On the
    benchmark's vectors (35,651 MiniLM-sized hashed entities and relations of
    MuSiQue) 16/64/128 found 0.958 of the true top 10, 12/32/128 0.888
    (``benchmarks/findings.md``)."""
_F32 = np.dtype("<f4")
log = logging.getLogger(__name__)


@dataclass
class _State:
    seq: int
    floor: int
    next_key: int
    dimension: int | None
    embedder: str | None
    epoch: str


class USearchVectorStore(SQLiteStore, VectorStore):
    """Vectors in SQLite, searched through an HNSW graph of their 8-bit
    copies and scored exactly (see the module docstring)."""

    name: ClassVar[str] = "usearch"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES,
         Capability.METADATA_FILTER, Capability.APPROXIMATE_SEARCH}
    )
    Options: ClassVar[type[USearchOptions]] = USearchOptions
    options: USearchOptions
    table = "vectors"
    key = "id"
    schema = """
    CREATE TABLE IF NOT EXISTS vectors (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        id BLOB NOT NULL,
        key INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        vector BLOB NOT NULL,
        metadata BLOB NOT NULL,
        PRIMARY KEY (workspace, namespace, id)
    );
    CREATE UNIQUE INDEX IF NOT EXISTS vectors_key ON vectors (workspace, namespace, key);
    CREATE INDEX IF NOT EXISTS vectors_seq ON vectors (workspace, namespace, seq, key);
    CREATE TABLE IF NOT EXISTS vectors_gone (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        key INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (workspace, namespace, key)
    );
    CREATE TABLE IF NOT EXISTS vectors_state (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        seq INTEGER NOT NULL,
        floor INTEGER NOT NULL,
        next_key INTEGER NOT NULL,
        dimension INTEGER,
        embedder TEXT,
        epoch TEXT NOT NULL,
        PRIMARY KEY (workspace, namespace)
    )
    """

    def __init__(self, config) -> None:
        super().__init__(config)
        self._graph: Any = None
        self._seq = -1
        """The ``seq`` the graph reflects (-1: none built)."""
        self._epoch = ""
        self._changed = False
        """The graph changed since it was loaded or saved."""

    @property
    def sidecar(self) -> Path:
        """Names the saved graph's file (beside it) and the ``seq`` it reflects."""
        return Path(self.config.working_dir) / self.workspace / "vectors" / f"{self.namespace}.usearch.json"

    def where(self) -> str:
        return f"vector table of {self.path} (namespace {self.namespace})"

    # -- lifecycle -------------------------------------------------------------

    async def _open(self) -> None:
        await super()._open()
        try:
            await self.db.run(self._load)
        except BaseException:
            await super()._close()
            raise

    def _load(self) -> None:
        state = self._state()
        rows = self.db.fetchone(f"SELECT EXISTS (SELECT 1 {self._where()})", self._scope)[0]  # not a count: a scan
        stored = state.dimension if state is not None and rows else None
        self.stored_dimension = stored if stored != self.dimension else None
        self.stored_embedder = state.embedder if state is not None and rows else None
        self._graph, self._seq, self._changed = None, -1, False
        if self.stored_dimension is None:
            self._restore(state)
            self._catch_up()

    def _restore(self, state: _State | None) -> None:
        """The saved graph, when it is this database's and not older than ``floor``."""
        if state is None:
            return
        try:
            saved = json.loads(self.sidecar.read_text())
            if saved["epoch"] != state.epoch or not state.floor <= saved["seq"] <= state.seq:
                return
            graph = _usearch().restore(str(self.sidecar.parent / Path(saved["file"]).name))
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return  # a cache: built again from the rows
        if graph is not None and graph.ndim == self.dimension:
            self._graph, self._seq, self._epoch = graph, int(saved["seq"]), state.epoch

    async def _close(self) -> None:
        if self._db is not None and self._changed:
            await self.db.run(self._save)
        self._graph = None
        await super()._close()

    def _save(self) -> None:
        """Write the graph to a file named by its ``seq``, then the sidecar
        naming it, then remove the older files: two processes closing at once
        each write their own file, and a sidecar never names a graph older
        than the ``seq`` it states. A cache, so a failure is only logged."""
        if self._graph is None:
            return
        folder = self.sidecar.parent
        name = f"{self.namespace}.{self._epoch[:12]}-{self._seq}.usearch"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._graph.save(str(folder / f"{name}.tmp"))
            os.replace(folder / f"{name}.tmp", folder / name)
            side = self.sidecar.with_name(f"{self.sidecar.name}.tmp")
            side.write_text(json.dumps({"file": name, "seq": self._seq, "epoch": self._epoch}))
            os.replace(side, self.sidecar)
            self._changed = False
            for old in folder.glob(f"{self.namespace}.*.usearch"):
                if old.name != name:
                    old.unlink(missing_ok=True)
        except (OSError, RuntimeError) as exc:
            log.warning("could not save the vector graph of %s to %s: %s (it is built again at the next open)",
                        self.namespace, folder, exc)

    async def _drop(self) -> None:
        def drop() -> None:
            with self.db.transaction() as conn:
                state = self._state(conn)
                conn.execute(f"DELETE {self._where()}", self._scope)
                conn.execute("DELETE FROM vectors_gone WHERE workspace = ? AND namespace = ?", self._scope)
                if state is not None:
                    seq = state.seq + 1
                    conn.execute(
                        "UPDATE vectors_state SET seq = ?, floor = ?, dimension = NULL, embedder = NULL "
                        "WHERE workspace = ? AND namespace = ?", (seq, seq, *self._scope))
            self.stored_dimension = self.stored_embedder = None
            self._graph, self._seq = None, -1
            self.sidecar.unlink(missing_ok=True)
            for graph in self.sidecar.parent.glob(f"{self.namespace}.*.usearch"):
                graph.unlink(missing_ok=True)

        await self.db.run(drop)

    # -- the graph -------------------------------------------------------------

    def _state(self, conn: sqlite3.Connection | None = None) -> _State | None:
        sql = ("SELECT seq, floor, next_key, dimension, embedder, epoch FROM vectors_state "
               "WHERE workspace = ? AND namespace = ?")
        row = conn.execute(sql, self._scope).fetchone() if conn is not None else self.db.fetchone(sql, self._scope)
        return _State(*row) if row is not None else None

    def _new_graph(self) -> Any:
        o = self.options
        return _usearch()(ndim=self.dimension, metric="cos", dtype="i8", connectivity=o.connectivity,
                     expansion_add=o.expansion_add, expansion_search=o.expansion_search)

    def _catch_up(self) -> None:
        """Bring the graph up to the database's ``seq`` (in the connection's thread)."""
        if self.stored_dimension is not None:
            return
        state = self._state()
        if state is None:
            if self._graph is None:
                self._graph, self._seq, self._epoch = self._new_graph(), 0, ""
            return
        if self._graph is not None and state.epoch == self._epoch and state.floor <= self._seq == state.seq:
            return
        if self._graph is None or state.epoch != self._epoch or self._seq < state.floor:
            self._graph, self._seq, self._epoch = self._new_graph(), -1, state.epoch
        after = self._seq
        for keys, vectors in self._changed_rows(after):
            self._put(keys, vectors)
        gone = [k for (k,) in self.db.fetchall(
            "SELECT key FROM vectors_gone WHERE workspace = ? AND namespace = ? AND seq > ?", (*self._scope, after))]
        self._remove(gone)
        self._seq, self._changed = state.seq, True

    def _changed_rows(self, after: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(keys, float32 matrix) of the rows written after ``seq`` ``after``,
        ``PAGE`` at a time, in (seq, key) order (the index ``vectors_seq``)."""
        last = (after, -1)
        while True:
            rows = self.db.fetchall(
                f"SELECT seq, key, vector {self._where(' AND seq >= ? AND (seq, key) > (?, ?)')} "
                "ORDER BY seq, key LIMIT ?", (*self._scope, after + 1, *last, PAGE))
            if not rows:
                return
            keys = np.array([r[1] for r in rows], dtype=np.uint64)
            yield keys, np.frombuffer(b"".join(r[2] for r in rows), dtype=_F32).reshape(len(rows), -1)
            last = rows[-1][:2]

    def _put(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        assert self._graph is not None
        if not len(keys):
            return
        self._remove(keys)  # a replaced record keeps its key
        self._graph.add(keys, unit_rows(vectors), threads=0 if len(keys) >= PAGE else 1)

    def _remove(self, keys: Sequence[int] | np.ndarray) -> None:
        assert self._graph is not None
        keys = np.asarray(keys, dtype=np.uint64)
        if len(keys):
            present = keys[np.asarray(self._graph.contains(keys), dtype=bool).reshape(-1)]
            if len(present):
                self._graph.remove(present)

    # -- writes ----------------------------------------------------------------

    def _write(self, change: Callable[[sqlite3.Connection, _State, int], Callable[[], None]]) -> None:
        """One write: ``change(conn, state, seq)`` writes its rows and returns
        what to apply to the graph, which is applied only when the graph was
        up to date before the write (else it catches up, this write included)."""
        with self.db.transaction() as conn:
            state = self._state(conn)
            if state is None:  # the namespace's first write: the empty graph is in step
                state = _State(0, 0, 0, None, None, uuid.uuid4().hex)
                conn.execute("INSERT INTO vectors_state VALUES (?, ?, 0, 0, 0, NULL, NULL, ?)",
                             (*self._scope, state.epoch))
                if self._graph is not None and self._seq == 0 and not self._epoch:
                    self._epoch = state.epoch
            seq = state.seq + 1
            apply = change(conn, state, seq)
            conn.execute("UPDATE vectors_state SET seq = ? WHERE workspace = ? AND namespace = ?", (seq, *self._scope))
        in_step = self._graph is not None and self._seq == state.seq and self._epoch == state.epoch
        if not in_step:
            self._catch_up()
            return
        try:
            apply()
            self._seq, self._changed = seq, True
        except BaseException:
            self._graph, self._seq = None, -1  # built again from the rows at the next read
            raise

    async def _upsert(self, ids: list[str], vectors: np.ndarray, metadata: list[dict[str, JSONScalar]]) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=_F32)

        def change(conn: sqlite3.Connection, state: _State, seq: int) -> Callable[[], None]:
            keys = self._keys(conn, ids)
            fresh = [i for i in ids if i not in keys]
            keys.update(zip(fresh, range(state.next_key, state.next_key + len(fresh))))
            conn.executemany(
                "INSERT INTO vectors VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workspace, namespace, id) "
                "DO UPDATE SET seq = excluded.seq, vector = excluded.vector, metadata = excluded.metadata",
                [(*self._scope, _id(i), keys[i], seq, row.tobytes(), _dumps(m))
                 for i, row, m in zip(ids, matrix, metadata)])
            conn.execute(
                "UPDATE vectors_state SET next_key = ?, dimension = ?, embedder = coalesce(embedder, ?) "
                "WHERE workspace = ? AND namespace = ?",
                (state.next_key + len(fresh), self.dimension, self.config.embedder, *self._scope))
            order = np.array([keys[i] for i in ids], dtype=np.uint64)
            return lambda: self._put(order, matrix)

        await self.db.run(self._write, change)
        self.stored_embedder = self.stored_embedder or self.config.embedder

    async def _delete(self, ids: list[str]) -> None:
        def change(conn: sqlite3.Connection, state: _State, seq: int) -> Callable[[], None]:
            keys = list(self._keys(conn, ids).values())
            for part in chunked([_id(i) for i in ids]):
                conn.execute(f"DELETE {self._where(f' AND id IN ({_marks(part)})')}", (*self._scope, *part))
            conn.executemany("INSERT OR REPLACE INTO vectors_gone VALUES (?, ?, ?, ?)",
                             [(*self._scope, k, seq) for k in keys])
            return lambda: self._remove(keys)

        await self.db.run(self._write, change)

    def _keys(self, conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for part in chunked([_id(i) for i in ids]):
            rows = conn.execute(f"SELECT id, key {self._where(f' AND id IN ({_marks(part)})')}",
                                (*self._scope, *part)).fetchall()
            found.update((_str(i), k) for i, k in rows)
        return found

    # -- reads -----------------------------------------------------------------

    async def _count(self) -> int:
        return (await self.db.run(self.db.fetchone, f"SELECT count(*) {self._where()}", self._scope))[0]

    async def _ids(self) -> AsyncIterator[str]:
        after = b""
        while page := await self._after("id", after, 1000):
            for (i,) in page:
                yield _str(i)
            after = page[-1][0]

    async def _records(self, batch: int) -> AsyncIterator[dict[str, tuple[np.ndarray, dict[str, JSONScalar]]]]:
        after = b""
        while page := await self._after("id, vector, metadata", after, batch):
            yield {_str(i): (np.frombuffer(v, dtype=_F32), _loads(m)) for i, v, m in page}
            after = page[-1][0]

    async def _after(self, columns: str, after: bytes, limit: int) -> list[tuple]:
        """``columns`` of up to ``limit`` rows with ids after ``after``, in id
        order (keyset pages: a row there for the whole scan is seen once)."""
        return await self.db.run(self.db.fetchall, f"SELECT {columns} {self._where(' AND id > ?')} ORDER BY id LIMIT ?",
                                 (*self._scope, after, limit))

    async def _get(self, ids: list[str]) -> dict[str, tuple[np.ndarray, dict[str, JSONScalar]]]:
        def get() -> dict[str, tuple[np.ndarray, dict[str, JSONScalar]]]:
            rows = self._rows_where("id", [_id(i) for i in ids])
            return {_str(i): (np.frombuffer(v, dtype=_F32), _loads(m)) for i, v, m in rows}

        return await self.db.run(get)

    async def _query(self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None
                     ) -> list[VectorHit]:
        if filter:
            return await self.db.run(self._scan, unit, filter)
        return await search_past_ties(lambda n: self.db.run(self._search, unit, n), top_k, min_score)

    def _search(self, unit: np.ndarray, n: int) -> list[VectorHit]:
        """The graph's ``n`` best candidates, scored exactly (in the connection's thread)."""
        self._catch_up()
        assert self._graph is not None
        size = len(self._graph)
        if not size:
            return []
        found = self._graph.search(unit.astype(np.float32), min(n, size), exact=size <= self.options.exact_rows, threads=1)
        return self._scored(self._rows_where("key", [int(k) for k in np.asarray(found.keys)]), unit)

    def _rows_where(self, column: str, values: list[Any]) -> list[tuple]:
        """(id, vector, metadata) of the rows whose ``column`` is among ``values``."""
        rows: list[tuple] = []
        for part in chunked(values):
            rows += self.db.fetchall(f"SELECT id, vector, metadata {self._where(f' AND {column} IN ({_marks(part)})')}",
                                     (*self._scope, *part))
        return rows

    def _scan(self, unit: np.ndarray, filter: Filter) -> list[VectorHit]:
        """Every row that ``filter`` keeps, scored exactly (in the connection's thread)."""
        kept: list[tuple] = []
        after = b""
        while True:
            rows = self.db.fetchall(f"SELECT id, vector, metadata {self._where(' AND id > ?')} ORDER BY id LIMIT ?",
                                    (*self._scope, after, PAGE))
            if not rows:
                return self._scored(kept, unit)
            kept += [r for r in rows if matches_filter(_loads(r[2]), filter)]
            after = rows[-1][0]

    @staticmethod
    def _scored(rows: list[tuple], unit: np.ndarray) -> list[VectorHit]:
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=_F32).reshape(len(rows), -1).astype(np.float64)
        scores = np.clip(matrix @ unit / np.linalg.norm(matrix, axis=1), -1.0, 1.0)
        return [VectorHit(id=_str(r[0]), score=float(s), metadata=_loads(r[2])) for r, s in zip(rows, scores)]


def _marks(part: Sequence[Any]) -> str:
    return ",".join("?" * len(part))
