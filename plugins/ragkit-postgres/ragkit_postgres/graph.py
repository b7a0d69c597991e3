"""Graph store ``postgres``: node and edge tables (no Apache AGE)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ragkit.protocols.base import Capability
from ragkit.protocols.graph import EdgeKey, GraphContext, GraphStore
from ragkit.schema import Edge, Node
from ragkit_postgres._db import PostgresStore


class PostgresGraphStore(PostgresStore, GraphStore):
    """Nodes in ``<prefix>_nodes``, edges in ``<prefix>_edges`` once each as
    ``a <= b`` (keyed by workspace and namespace, indexed from both ends).
    Every read takes a whole set of ids in one statement: a neighbourhood
    (``subgraph``) costs one query per hop for the whole frontier, bounded by
    its depth and node cap, never one per node and never a recursive query
    that grows with the paths. A node's degree is the number of its edges
    (a self-loop once), counted by the indexes.
    """

    name: ClassVar[str] = "postgres"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES}
    )

    def _in(self, table: str) -> str:
        return f"{self.table(table)} WHERE workspace = $1 AND namespace = $2"

    async def _upsert_nodes(self, nodes: dict[str, dict[str, Any]]) -> None:
        async with self.write("write nodes", {self.table("nodes"): len(nodes)}) as conn:
            await conn.execute(
                f"INSERT INTO {self.table('nodes')} (workspace, namespace, id, properties) "
                "SELECT $1, $2, i, p FROM unnest($3::text[], $4::text[]) AS t(i, p) "
                "ON CONFLICT (workspace, namespace, id) DO UPDATE SET properties = excluded.properties",
                *self.scope, list(nodes), [_dumps(p) for p in nodes.values()],
            )

    async def _upsert_edges(self, edges: dict[EdgeKey, dict[str, Any]]) -> None:
        ends = list(dict.fromkeys(n for key in edges for n in key))
        rows = {self.table("nodes"): len(ends), self.table("edges"): len(edges)}
        async with self.write("write edges", rows) as conn:
            await conn.execute(
                f"INSERT INTO {self.table('nodes')} (workspace, namespace, id, properties) "
                "SELECT $1, $2, i, '{}' FROM unnest($3::text[]) AS t(i) ON CONFLICT DO NOTHING",
                *self.scope, ends,
            )
            await conn.execute(
                f"INSERT INTO {self.table('edges')} (workspace, namespace, a, b, properties) "
                "SELECT $1, $2, a, b, p FROM unnest($3::text[], $4::text[], $5::text[]) AS t(a, b, p) "
                "ON CONFLICT (workspace, namespace, a, b) DO UPDATE SET properties = excluded.properties",
                *self.scope, [a for a, _ in edges], [b for _, b in edges], [_dumps(p) for p in edges.values()],
            )

    async def _delete_nodes(self, ids: list[str]) -> None:
        async with self.write("delete nodes", {self.table("nodes"): len(ids)}) as conn:
            await conn.execute(
                f"DELETE FROM {self._in('edges')} AND (a = ANY($3::text[]) OR b = ANY($3::text[]))", *self.scope, ids
            )
            await conn.execute(f"DELETE FROM {self._in('nodes')} AND id = ANY($3::text[])", *self.scope, ids)

    async def _delete_edges(self, keys: list[EdgeKey]) -> None:
        async with self.write("delete edges", {self.table("edges"): len(keys)}) as conn:
            await conn.execute(
                f"DELETE FROM {self.table('edges')} e USING unnest($3::text[], $4::text[]) AS t(a, b) "
                "WHERE e.workspace = $1 AND e.namespace = $2 AND e.a = t.a AND e.b = t.b",
                *self.scope, [a for a, _ in keys], [b for _, b in keys],
            )

    async def _get_nodes(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        async with self.read("read nodes") as conn:
            rows = await conn.fetch(f"SELECT id, properties FROM {self._in('nodes')} AND id = ANY($3::text[])",
                                    *self.scope, ids)
        return {r[0]: json.loads(r[1]) for r in rows}

    async def _get_edges(self, keys: list[EdgeKey]) -> dict[EdgeKey, dict[str, Any]]:
        async with self.read("read edges") as conn:
            rows = await conn.fetch(
                f"SELECT e.a, e.b, e.properties FROM {self.table('edges')} e "
                "JOIN unnest($3::text[], $4::text[]) AS t(a, b) ON e.a = t.a AND e.b = t.b "
                "WHERE e.workspace = $1 AND e.namespace = $2", *self.scope, [a for a, _ in keys], [b for _, b in keys],
            )
        return {(r[0], r[1]): json.loads(r[2]) for r in rows}

    async def _nodes_edges(self, ids: list[str]) -> dict[str, list[str]]:
        async with self.read("read a neighbourhood") as conn:
            rows = await conn.fetch(
                f"SELECT id, NULL FROM {self._in('nodes')} AND id = ANY($3::text[]) "
                f"UNION ALL SELECT a, b FROM {self._in('edges')} AND a = ANY($3::text[]) "
                f"UNION ALL SELECT b, a FROM {self._in('edges')} AND b = ANY($3::text[]) AND a <> b",
                *self.scope, ids,
            )
        found: dict[str, list[str]] = {r[0]: [] for r in rows if r[1] is None}
        for node, other in rows:
            if other is not None and node in found:
                found[node].append(other)
        return found

    async def _degrees(self, ids: list[str]) -> dict[str, int]:
        async with self.read("count degrees") as conn:
            rows = await conn.fetch(
                f"SELECT n, count(*) FROM (SELECT a AS n FROM {self._in('edges')} AND a = ANY($3::text[]) "
                f"UNION ALL SELECT b FROM {self._in('edges')} AND b = ANY($3::text[]) AND a <> b) d GROUP BY n",
                *self.scope, ids,
            )
        return {r[0]: r[1] for r in rows}

    async def _context(self, ids: list[str], keys: list[EdgeKey], incident: bool) -> GraphContext:
        """One statement: the nodes named (ids and the asked edges' ends), the
        asked edges and, with ``incident``, every edge of ``ids``, and the
        degree of every node named or reached, each counted by the indexes."""
        edges, nodes = self.table("edges"), self.table("nodes")
        scope = "workspace = $1 AND namespace = $2"
        touching = (f" UNION SELECT a, b, properties FROM {edges} WHERE {scope} AND a = ANY($3::text[])"
                    f" UNION SELECT a, b, properties FROM {edges} WHERE {scope} AND b = ANY($3::text[])"
                    if incident else "")
        sql = (
            "WITH pairs AS (SELECT * FROM unnest($4::text[], $5::text[]) AS t(a, b)), "
            "named AS (SELECT unnest($3::text[]) AS id UNION SELECT a FROM pairs UNION SELECT b FROM pairs), "
            f"found AS (SELECT e.a, e.b, e.properties FROM {edges} e JOIN pairs t ON e.a = t.a AND e.b = t.b "
            f"WHERE e.{scope}{touching}), "
            "ends AS (SELECT id FROM named UNION SELECT a FROM found UNION SELECT b FROM found) "
            f"SELECT 0, id, NULL::text, properties, NULL::bigint FROM {nodes} WHERE {scope} "
            "AND id IN (SELECT id FROM named) "
            "UNION ALL SELECT 1, a, b, properties, NULL FROM found "
            f"UNION ALL SELECT 2, x.id, NULL, NULL, (SELECT count(*) FROM {edges} WHERE {scope} AND a = x.id) "
            f"+ (SELECT count(*) FROM {edges} WHERE {scope} AND b = x.id AND a <> x.id) FROM ends x"
        )
        async with self.read("read a neighbourhood") as conn:
            rows = await conn.fetch(sql, *self.scope, ids, [a for a, _ in keys], [b for _, b in keys])
        found = GraphContext()
        for kind, x, y, props, degree in rows:
            if kind == 0:
                found.nodes[x] = json.loads(props)
            elif kind == 1:
                found.edges[(x, y)] = json.loads(props)
            else:
                found.degrees[x] = degree
        if incident:
            found.incident = {n: [] for n in ids if n in found.nodes}
            for a, b in found.edges:
                for n, other in ((a, b), (b, a)) if a != b else ((a, a),):
                    if n in found.incident:
                        found.incident[n].append(other)
        return found

    async def _node_count(self) -> int:
        async with self.read("count nodes") as conn:
            return await conn.fetchval(f"SELECT count(*) FROM {self._in('nodes')}", *self.scope)

    async def _edge_count(self) -> int:
        async with self.read("count edges") as conn:
            return await conn.fetchval(f"SELECT count(*) FROM {self._in('edges')}", *self.scope)

    async def _nodes(self) -> AsyncIterator[Node]:
        sql = f"SELECT id, properties FROM {self._in('nodes')} AND id > $3 ORDER BY id LIMIT $4"
        async for row in self.pages(sql, *self.scope):
            yield Node(id=row[0], properties=json.loads(row[1]))

    async def _edges(self) -> AsyncIterator[Edge]:
        # Keyed by (a, b): pages by the pair, as a row value comparison.
        after, size = ("", ""), self.options.batch_size
        while True:
            async with self.read("list edges") as conn:
                rows = await conn.fetch(
                    f"SELECT a, b, properties FROM {self._in('edges')} AND (a, b) > ($3, $4) "
                    "ORDER BY a, b LIMIT $5", *self.scope, *after, size,
                )
            for a, b, props in rows:
                yield Edge(source=a, target=b, properties=json.loads(props))
            if len(rows) < size:
                return
            after = (rows[-1][0], rows[-1][1])

    async def _labels(self) -> list[str]:
        async with self.read("list node ids") as conn:
            return [r[0] for r in await conn.fetch(f"SELECT id FROM {self._in('nodes')}", *self.scope)]

    async def _drop(self) -> None:
        async with self.write("drop") as conn:
            await conn.execute(f"DELETE FROM {self._in('edges')}", *self.scope)
            await conn.execute(f"DELETE FROM {self._in('nodes')}", *self.scope)


def _dumps(properties: dict[str, Any]) -> str:
    return json.dumps(properties, ensure_ascii=False, allow_nan=False)
