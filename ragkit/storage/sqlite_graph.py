"""The default graph store: node and edge tables in the workspace's SQLite file.

Why not a graph held in memory: at 94,500 passages (the scale benchmark's
×50) the NetworkX graph held 1.4 GB of Python dicts, and saving it encoded
the whole graph at once. Here the graph is on disk and a query reads only
the few hundred rows around its entities (SQLite's page cache holds what is
hot), so memory does not grow with the graph and a write is one transaction
of the rows it changes, never a rewrite of the whole file.

Tables, in ``<working_dir>/<workspace>/ragkit.sqlite`` beside the KV and
doc-status tables:

- ``graph_nodes(workspace, namespace, id, properties)``
- ``graph_edges(workspace, namespace, a, b, properties)``, each undirected
  edge once as ``a <= b``, indexed from both ends.

Ids are stored as UTF-8 BLOBs, so SQLite compares them by their bytes, which
is code point order: the order of Python's ``str`` comparison that canonical
edge keys (``edge_key``) use. (Databases written before [graph.text.unicode]
may hold ids with lone surrogates, encoded as such: they are listed and
dropped, and read by id as missing.)
Properties are JSON, read back with their types (``1`` stays an int, ``1.0``
a float). A node's degree is the number of its edges (a self-loop once),
kept in its row by triggers on the edge table (in the transaction of the edge
write), so a query reads the degrees of a few hundred neighbours by key
instead of counting their edges.

A workspace indexed before this store was the default has its graph in the
NetworkX store's file (``graph/<namespace>.json`` and its journal). The first
time this store opens such a workspace's empty graph it imports that file, in
one transaction, and records the import in ``graph_imports`` so that a graph
emptied later is not filled again from it. The file itself is left where it
is (a downgrade, or ``[graph] name = "networkx"``, still reads it) and is no
longer read.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from ragkit.protocols.graph import EdgeKey, GraphContext, GraphStore, edge_key
from ragkit.schema import Edge, Node
from ragkit.storage._sqlite import MAX_PARAMS, SQLiteStore, chunked
from ragkit.storage._sqlite import json_bytes as _dumps
from ragkit.storage._sqlite import json_value as _loads
from ragkit.storage._sqlite import key_bytes as _id
from ragkit.storage._sqlite import key_text as _str
from ragkit.storage.networkx_graph import NetworkXGraphStore

log = logging.getLogger(__name__)

_PAGE = 1000
_SCOPE = "workspace = ? AND namespace = ?"
_BY_B = "graph_edges INDEXED BY graph_edges_b"
"""Reads by an edge's second end name their index, and ``CROSS JOIN`` keeps the
asked pairs the outer loop of ``_read_edges``: SQLite's planner has no
statistics here, and with a first index on (workspace, namespace, b) it
scanned the primary key's (workspace, namespace) prefix instead, 1.6 ms against
0.09 for 40 ids and 18 ms against 0.3 for 90 pairs at 16,513 edges. The index
now also covers ``a``; named, the choice cannot drift
(``tests/storage/test_sqlite_graph.py`` checks every keyed statement's plan)."""


_TRIGGERS = [
    # A self-loop's row matches ``id IN (a, a)`` once: it counts once.
    f"""CREATE TRIGGER IF NOT EXISTS graph_edge_{name} AFTER {event} ON graph_edges BEGIN
        UPDATE graph_nodes SET degree = degree {sign} 1
        WHERE workspace = {row}.workspace AND namespace = {row}.namespace AND id IN ({row}.a, {row}.b);
    END"""
    for name, event, sign, row in (("added", "INSERT", "+", "new"), ("removed", "DELETE", "-", "old"))
]
"""Each node's ``degree``, kept in step with every edge written or deleted, in its transaction."""


class SQLiteGraphStore(SQLiteStore, GraphStore):
    """Undirected property graph in two SQLite tables (see the module docstring).

    Every write is one committed transaction; reads take a whole set of ids
    per statement (``MAX_PARAMS`` at a time), and ``context`` answers a query
    stage's reads in one trip to the connection's thread."""

    table = "graph_nodes"
    key = "id"
    schema = """
    CREATE TABLE IF NOT EXISTS graph_nodes (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        id BLOB NOT NULL,
        degree INTEGER NOT NULL DEFAULT 0,  -- before the properties: read without them
        properties BLOB NOT NULL,
        PRIMARY KEY (workspace, namespace, id)
    );
    CREATE TABLE IF NOT EXISTS graph_edges (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        a BLOB NOT NULL,
        b BLOB NOT NULL,
        properties BLOB NOT NULL,
        PRIMARY KEY (workspace, namespace, a, b)
    );
    CREATE INDEX IF NOT EXISTS graph_edges_b ON graph_edges (workspace, namespace, b, a);
    CREATE TABLE IF NOT EXISTS graph_imports (
        workspace TEXT NOT NULL,
        namespace TEXT NOT NULL,
        source TEXT NOT NULL,
        PRIMARY KEY (workspace, namespace)
    )
    """

    async def _open(self) -> None:
        await super()._open()
        try:
            await self.db.run(self._create_triggers)
            await self._import_networkx_file()
        except BaseException:
            await self._close()
            raise

    def _create_triggers(self) -> None:
        with self.db.transaction() as conn:
            for statement in _TRIGGERS:
                conn.execute(statement)

    async def _import_networkx_file(self) -> None:
        """Fill the empty graph from the NetworkX store's file of the same
        workspace and namespace, once (see the module docstring)."""
        legacy = NetworkXGraphStore(self.config.model_copy(update={"options": {}}))
        if not (legacy.path.exists() or legacy._file.journal.exists()) or not await self.db.run(self._may_import):
            return
        async with legacy:  # read only: a store that never wrote leaves its files alone
            nodes = [(*self._scope, _id(n.id), _dumps(n.properties)) async for n in legacy.nodes()]
            edges = [(*self._scope, _id(e.source), _id(e.target), _dumps(e.properties)) async for e in legacy.edges()]

        def fill() -> bool:
            with self.db.transaction() as conn:
                if not self._may_import(conn):  # another process imported it meanwhile
                    return False
                conn.executemany("INSERT INTO graph_nodes (workspace, namespace, id, properties) VALUES (?, ?, ?, ?)", nodes)
                conn.executemany("INSERT INTO graph_edges VALUES (?, ?, ?, ?, ?)", edges)  # degrees: the trigger
                conn.execute("INSERT INTO graph_imports VALUES (?, ?, ?)", (*self._scope, str(legacy.path)))
                self.wrote(conn)
                return True

        if await self.db.run(fill):
            log.warning(
                "imported the graph of workspace %r from %s (%d nodes, %d edges) into %s; "
                "that file is no longer read and may be deleted", self.workspace, legacy.path, len(nodes),
                len(edges), self.path,
            )

    def _may_import(self, conn: sqlite3.Connection | None = None) -> bool:
        """Nothing imported before, and the graph empty."""
        run = conn.execute if conn is not None else self.db.fetchall
        return not any(
            list(run(f"SELECT 1 FROM {table} WHERE {_SCOPE} LIMIT 1", self._scope))
            for table in ("graph_imports", "graph_nodes")
        )

    # -- writes ----------------------------------------------------------------

    async def _upsert_nodes(self, nodes: dict[str, dict[str, Any]]) -> None:
        rows = [(*self._scope, _id(n), _dumps(p)) for n, p in nodes.items()]
        await self.write(
            "INSERT INTO graph_nodes (workspace, namespace, id, properties) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (workspace, namespace, id) DO UPDATE SET properties = excluded.properties",
            rows,
        )

    async def _upsert_edges(self, edges: dict[EdgeKey, dict[str, Any]]) -> None:
        ends = [(*self._scope, _id(n)) for n in dict.fromkeys(n for key in edges for n in key)]
        rows = [(*self._scope, _id(a), _id(b), _dumps(p)) for (a, b), p in edges.items()]

        def write() -> None:
            with self.db.transaction() as conn:
                conn.executemany(
                    "INSERT INTO graph_nodes (workspace, namespace, id, properties) VALUES (?, ?, ?, X'7B7D') "  # '{}' as a BLOB
                    "ON CONFLICT DO NOTHING",
                    ends,
                )
                conn.executemany(
                    "INSERT INTO graph_edges (workspace, namespace, a, b, properties) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (workspace, namespace, a, b) DO UPDATE SET properties = excluded.properties",
                    rows,
                )
                self.wrote(conn)

        await self.db.run(write)

    async def _delete_nodes(self, ids: list[str]) -> None:
        def delete() -> None:
            with self.db.transaction() as conn:
                for part, marks in self._parts(ids):
                    for end in ("a", "b"):
                        conn.execute(f"DELETE FROM graph_edges WHERE {_SCOPE} AND {end} IN ({marks})", (*self._scope, *part))
                    conn.execute(f"DELETE FROM graph_nodes WHERE {_SCOPE} AND id IN ({marks})", (*self._scope, *part))
                self.wrote(conn)

        await self.db.run(delete)

    async def _delete_edges(self, keys: list[EdgeKey]) -> None:
        await self.write(
            f"DELETE FROM graph_edges WHERE {_SCOPE} AND a = ? AND b = ?",
            [(*self._scope, _id(a), _id(b)) for a, b in keys],
        )

    async def _drop(self) -> None:
        def drop() -> None:
            with self.db.transaction() as conn:
                conn.execute(f"DELETE FROM graph_edges WHERE {_SCOPE}", self._scope)
                conn.execute(f"DELETE FROM graph_nodes WHERE {_SCOPE}", self._scope)
                self.wrote(conn)

        await self.db.run(drop)

    # -- reads (each a function run in the connection's thread) -----------------

    def _parts(self, ids: Sequence[str]) -> Iterable[tuple[list[bytes], str]]:
        """``ids`` as BLOB parameters, ``MAX_PARAMS`` at a time, with their ``?`` marks."""
        for part in chunked(ids, MAX_PARAMS - 2):
            yield [_id(n) for n in part], ",".join("?" * len(part))

    def _select(self, sql: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """``sql`` (its ``{marks}`` the ids' placeholders, after the scope's two) for every part of ``ids``."""
        rows: list[tuple[Any, ...]] = []
        for part, marks in self._parts(ids):
            rows += self.db.fetchall(sql.format(marks=marks), (*self._scope, *part))
        return rows

    def _read_nodes(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return self._read_nodes_degrees(ids)[0]

    def _read_nodes_degrees(self, ids: Sequence[str]) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
        rows = self._select(f"SELECT id, properties, degree FROM graph_nodes WHERE {_SCOPE} AND id IN ({{marks}})", ids)
        names = [_str(n) for n, _, _ in rows]
        return ({n: _loads(p) for n, (_, p, _) in zip(names, rows)}, {n: d for n, (_, _, d) in zip(names, rows)})

    def _read_edges(self, keys: Sequence[EdgeKey]) -> dict[EdgeKey, dict[str, Any]]:
        found: dict[EdgeKey, dict[str, Any]] = {}
        for part in chunked(keys, (MAX_PARAMS - 2) // 2):
            pairs = ",".join(["(?, ?)"] * len(part))
            rows = self.db.fetchall(
                f"WITH t(a, b) AS (VALUES {pairs}) SELECT e.a, e.b, e.properties FROM t "
                f"CROSS JOIN graph_edges e ON e.workspace = ? AND e.namespace = ? AND e.a = t.a AND e.b = t.b",
                (*(_id(n) for key in part for n in key), *self._scope),
            )
            found.update(((_str(a), _str(b)), _loads(p)) for a, b, p in rows)
        return found

    def _read_neighbours(self, ids: Sequence[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {
            _str(n): [] for (n,) in self._select(f"SELECT id FROM graph_nodes WHERE {_SCOPE} AND id IN ({{marks}})", ids)
        }
        rows = self._select(
            f"SELECT a, b FROM graph_edges WHERE {_SCOPE} AND a IN ({{marks}})", ids
        ) + [
            (b, a) for a, b in self._select(f"SELECT a, b FROM {_BY_B} WHERE {_SCOPE} AND b IN ({{marks}}) AND a <> b", ids)
        ]
        for n, other in rows:
            found[_str(n)].append(_str(other))
        return found

    def _read_degrees(self, ids: Sequence[str]) -> dict[str, int]:
        rows = self._select(f"SELECT id, degree FROM graph_nodes WHERE {_SCOPE} AND id IN ({{marks}})", ids)
        return {_str(n): degree for n, degree in rows}

    def _read_context(self, ids: list[str], keys: list[EdgeKey], incident: bool) -> GraphContext:
        """``read_context``'s reads in this thread, a node's degree read with its properties."""
        named = list(dict.fromkeys([*ids, *(n for k in keys for n in k)]))
        nodes, degrees = self._read_nodes_degrees(named)
        if not incident:  # every edge found is among keys, so its ends are named already
            return GraphContext(nodes, self._read_edges(keys), degrees)
        neighbours = self._read_neighbours(ids)
        keys = list(dict.fromkeys([*keys, *(edge_key(n, m) for n, others in neighbours.items() for m in others)]))
        around = list(dict.fromkeys(m for others in neighbours.values() for m in others if m not in degrees))
        return GraphContext(nodes, self._read_edges(keys), {**degrees, **self._read_degrees(around)}, neighbours)

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.db.run(fn, *args)

    async def _get_nodes(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        return await self._read(self._read_nodes, ids)

    async def _get_edges(self, keys: list[EdgeKey]) -> dict[EdgeKey, dict[str, Any]]:
        return await self._read(self._read_edges, keys)

    async def _nodes_edges(self, ids: list[str]) -> dict[str, list[str]]:
        return await self._read(self._read_neighbours, ids)

    async def _degrees(self, ids: list[str]) -> dict[str, int]:
        return await self._read(self._read_degrees, ids)

    async def _context(self, ids: list[str], keys: list[EdgeKey], incident: bool) -> GraphContext:
        return await self._read(self._read_context, ids, keys, incident)

    async def _node_count(self) -> int:
        return await self._count("graph_nodes")

    async def _edge_count(self) -> int:
        return await self._count("graph_edges")

    async def _count(self, table: str) -> int:
        row = await self.db.run(self.db.fetchone, f"SELECT count(*) FROM {table} WHERE {_SCOPE}", self._scope)
        return int(row[0]) if row else 0

    async def _labels(self) -> list[str]:
        rows = await self.db.run(self.db.fetchall, f"SELECT id FROM graph_nodes WHERE {_SCOPE}", self._scope)
        return [_str(n) for (n,) in rows]

    async def _nodes(self) -> AsyncIterator[Node]:
        # Keyset pages: no cursor is held between pages, so a node present for
        # the whole scan is seen once even while other tasks write.
        after = b""
        while True:
            rows = await self.db.run(
                self.db.fetchall,
                f"SELECT id, properties FROM graph_nodes WHERE {_SCOPE} AND id > ? ORDER BY id LIMIT ?",
                (*self._scope, after, _PAGE),
            )
            for n, props in rows:
                yield Node.model_construct(id=_str(n), properties=_loads(props))
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]

    async def _edges(self) -> AsyncIterator[Edge]:
        after: tuple[bytes, bytes] = (b"", b"")
        while True:
            rows = await self.db.run(
                self.db.fetchall,
                f"SELECT a, b, properties FROM graph_edges WHERE {_SCOPE} AND (a, b) > (?, ?) ORDER BY a, b LIMIT ?",
                (*self._scope, *after, _PAGE),
            )
            for a, b, props in rows:
                yield Edge.model_construct(source=_str(a), target=_str(b), properties=_loads(props))
            if len(rows) < _PAGE:
                return
            after = (rows[-1][0], rows[-1][1])
