"""The workspace's writer lease in the graph server (rules:
:mod:`ragkit.protocols.lease`), for workspaces whose doc-status store holds
none (the embedded one): every process of the workspace reaches this server,
wherever it runs, so the lease keeps them to one writer.

One node per workspace, ``(:`<prefix>.<workspace>:lock` {_ragkit_id: "writer",
token, holder, expires})``; no store's label can be that one (names cannot
hold ``:``), so no store ever reads or drops it. Each operation is one
statement on that node, timed by the server's clock (``timestamp()``, ms), so
the hosts' clocks do not matter:

- ``acquire``: ``MERGE`` the node, take it if it is free or expired;
- ``renew``: extend ``expires`` only if the token is ours and unexpired;
- ``release``: delete the node only if the token is ours.

Atomicity. Each statement first writes the node (``SET l._ragkit_lock``): on
Neo4j that takes the node's write lock until commit, so a concurrent statement
waits and then reads the committed node (Neo4j's documented cure for lost
updates), and a uniqueness constraint on the label (created once, on Neo4j
4.4 and later) keeps two ``MERGE`` from making two nodes. FalkorDB runs the
write queries of a graph one at a time, so each statement is atomic there.

Fenced writes. While a process holds this lease, every write statement of a
graph store on this server and workspace (``Neo4jGraphStore._write``) starts
by matching the lock node with the holder's token (and writing it, which takes
its lock on Neo4j, so an ``acquire`` waits for the write's commit), and the
write's transaction ends by reading it again. A holder stalled past its lease
while another took it writes nothing, even with a request it had sent before
the stall: the statement matches no lock node, and the last read raises
``WriterLeaseLostError``. Every value is bound (``cypher.Binder``).

Statements go through the store's own plumbing (its transaction runner, error
translation and value binder), so the lease works on every server the store
does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragkit.protocols.lease import Holder
from ragkit_neo4j.cypher import ID_KEY, quote_ident

if TYPE_CHECKING:
    from ragkit_neo4j.graph import Neo4jGraphStore

KEY = "writer"

_GUARD = (
    "MATCH (ragkit_fence:{label} {{{id}: $ragkit_fence_key}}) WHERE ragkit_fence.token = $ragkit_fence_token "
    "SET ragkit_fence._ragkit_lock = true WITH ragkit_fence "
)
_VERIFY = (
    "MATCH (ragkit_fence:{label} {{{id}: $ragkit_fence_key}}) WHERE ragkit_fence.token = $ragkit_fence_token "
    "RETURN ragkit_fence.token"
)


class Neo4jLease:
    heartbeat = True

    def __init__(self, store: Neo4jGraphStore) -> None:
        self.store = store
        self.label_name = f"{store.options.label_prefix}.{store.workspace}:lock"
        self._label = quote_ident(self.label_name)
        self.where = f"Neo4j {store.options.uri} node :`{self.label_name}`"

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        await self._schema()
        rows = await self._run(
            "take the writer lease",
            f"MERGE (l:{self._label} {{{ID_KEY}: $key}}) SET l._ragkit_lock = true WITH l "
            "WHERE l.token IS NULL OR l.expires < timestamp() "
            "SET l.token = $token, l.holder = $holder, l.expires = timestamp() + $ms RETURN l.token",
            token=holder.token, holder=holder.encode().decode(), ms=_ms(ttl),
        )
        return bool(rows)

    async def holder(self) -> Holder | None:
        query, params = self.store._binder.bind(
            f"MATCH (l:{self._label} {{{ID_KEY}: $key}}) WHERE l.expires >= timestamp() RETURN l.holder", key=KEY
        )
        rows = await self.store._read("read the writer lease", query, params)
        return Holder.decode(rows[0][0]) if rows else None

    async def renew(self, holder: Holder, ttl: float) -> bool:
        rows = await self._run(
            "renew the writer lease",
            f"MATCH (l:{self._label} {{{ID_KEY}: $key}}) SET l._ragkit_lock = true WITH l "
            "WHERE l.token = $token AND l.expires >= timestamp() "
            "SET l.expires = timestamp() + $ms RETURN l.token",
            token=holder.token, ms=_ms(ttl),
        )
        return bool(rows)

    async def release(self, holder: Holder) -> None:
        await self._run(
            "release the writer lease",
            f"MATCH (l:{self._label} {{{ID_KEY}: $key}}) SET l._ragkit_lock = true WITH l "
            "WHERE l.token = $token DELETE l",
            token=holder.token,
        )

    def reaches(self, store: Neo4jGraphStore) -> bool:
        """Whether ``store`` writes where this lease's lock node is."""
        o, mine = store.options, self.store.options
        return (o.uri, o.database, Neo4jLease(store).label_name) == (mine.uri, mine.database, self.label_name)

    def guarded(
        self, store: Neo4jGraphStore, holder: Holder, statements: list[tuple[str, dict[str, Any]]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """``statements`` each made to write only while ``holder`` holds the
        lease, then the read that says whether it still does (no row: it does not)."""
        values = {"ragkit_fence_key": KEY, "ragkit_fence_token": holder.token}
        guard, guard_params = store._binder.bind(_GUARD.format(label=self._label, id=ID_KEY), **values)
        out = [(guard + query, {**params, **guard_params}) for query, params in statements]
        return [*out, store._binder.bind(_VERIFY.format(label=self._label, id=ID_KEY), **values)]

    async def _run(self, what: str, template: str, **values: Any) -> list[list[Any]]:
        query, params = self.store._binder.bind(template, key=KEY, **values)
        (rows,) = await self.store._write(what, [(query, params)], fenced=False)
        return rows

    async def _schema(self) -> None:
        """The label's uniqueness constraint, once per driver, where the server
        has ``IF NOT EXISTS`` (Neo4j 4.4+), whatever the ``indexes`` option:
        without it two concurrent acquires could each make a node."""
        shared = self.store._conn()
        key = (self.store.options.database, self.label_name)
        if not self.store.server.if_not_exists or key in shared.schema_done:
            return
        name = quote_ident(f"{self.label_name}.{ID_KEY}.unique")
        await self.store._write(
            "create the writer lease's constraint",
            [(f"CREATE CONSTRAINT {name} IF NOT EXISTS FOR (n:{self._label}) REQUIRE n.{ID_KEY} IS UNIQUE", {})],
            fenced=False,
        )
        shared.schema_done.add(key)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
