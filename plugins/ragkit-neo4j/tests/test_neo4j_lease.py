"""The graph server's writer lease as other processes see it: its lock node
(shared with every other ragkit process on the workspace, older ones
included), which stores it fences, and what it tells a Neo4j server.

FalkorDB (the test server) takes values inlined and has no ``IF NOT EXISTS``;
what the lease sends to Neo4j itself (parameters, the uniqueness constraint)
is read at the door of a loopback stub that answers as Neo4j 5.26 would
(``bolt_stub.py``, mode ``neo4j``). The lease contract
(``TestLease_graph_neo4j``) checks the rules through the lease's methods.

Troubleshoot: ``ragkit_neo4j/lease.py``.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from bolt_stub import RUN, BoltStub, StubFailure
from ragkit.errors import StoreError
from ragkit.protocols import StoreConfig
from ragkit.protocols.lease import Holder
from ragkit_neo4j import Neo4jGraphStore


async def test_the_lock_node_has_the_documented_label_per_workspace(graphs, make_config, neo4j_options):
    config = make_config(label_prefix="rk")
    store = await graphs(config)
    lease = store.writer_lease()
    label = f"rk.{config.workspace}:lock"
    assert lease.where == f"Neo4j {neo4j_options['uri']} node :`{label}`"
    me = Holder()
    assert await lease.acquire(me, 30)
    try:
        rows = await store._read("test", f"MATCH (n:`{label}`) RETURN n._ragkit_id, n.token", {})
        assert rows == [["writer", me.token]]
        # Another workspace on the same server: a lease of its own.
        other = (await graphs(make_config(label_prefix="rk"))).writer_lease()
        them = Holder()
        assert await other.acquire(them, 30)
        await other.release(them)
    finally:
        await lease.release(me)
    assert await store._read("test", f"MATCH (n:`{label}`) RETURN n.token", {}) == []


async def test_the_lease_fences_the_stores_of_its_server_database_and_workspace(graphs, make_config):
    config = make_config(label_prefix="rk")
    lease = (await graphs(config)).writer_lease()

    def store(**changes) -> Neo4jGraphStore:
        changed = config.model_copy(update={k: v for k, v in changes.items() if k in ("namespace", "workspace")})
        options = {k: v for k, v in changes.items() if k not in ("namespace", "workspace")}
        return Neo4jGraphStore(changed.model_copy(update={"options": {**config.options, **options}}))

    assert lease.reaches(store()) and lease.reaches(store(namespace="another"))
    assert not lease.reaches(store(workspace="another"))
    assert not lease.reaches(store(label_prefix="other"))
    assert not lease.reaches(store(database="another"))
    assert not lease.reaches(store(uri="bolt://127.0.0.1:1"))


# -- on Neo4j (the stub) ------------------------------------------------------------


def _neo4j_rows(holders: dict[str, str]):
    """Replies of a server holding one lock node: taken, renewed and read while
    ``holders`` says so (the test keeps it)."""

    def rows(query: str, params: dict) -> list[list]:
        wanted = set(re.findall(r"\$(\w+)", query)) - params.keys()
        if wanted:  # as Neo4j: Neo.ClientError.Statement.ParameterMissing
            raise StubFailure(f"Expected parameter(s): {', '.join(sorted(wanted))}")
        words = query.casefold()  # Cypher's keywords are case-insensitive
        if words.startswith("merge (l:"):
            holders[params["key"]] = params["holder"]
            return [[params["token"]]]
        if "set l.expires" in words:
            return [[params["token"]]]
        if words.endswith("return l.holder"):
            return [[holders[params["key"]]]] if params["key"] in holders else []
        return []

    return rows


def _store(uri: str, workspace: str) -> Neo4jGraphStore:
    return Neo4jGraphStore(StoreConfig(namespace="ns", workspace=workspace, options={"uri": uri}))


async def test_on_neo4j_the_lease_sends_parameters_and_makes_its_constraint_once_per_label(stub):
    holders: dict[str, str] = {}
    server = stub("neo4j", _neo4j_rows(holders))
    first, second = _store(server.uri, "w1"), _store(server.uri, "w2")
    await first.open()
    await second.open()
    try:
        assert first.server.product == "neo4j" and first.server.if_not_exists
        me = Holder()
        for lease in (first.writer_lease(), first.writer_lease(), second.writer_lease()):
            assert await lease.acquire(me, 30)
        lease = first.writer_lease()
        assert await lease.renew(me, 12.5)
        assert (await lease.holder()).token == me.token
        await lease.release(me)
        assert await lease.renew(me, 0.0004)  # the stub renews anything: what matters is the ms sent
    finally:
        await first.close()
        await second.close()
    runs = [(query, params) for query, params, *_ in server.sent(RUN)]
    constraints = [query for query, _ in runs if query.startswith("CREATE CONSTRAINT") and ":lock" in query]
    assert constraints == [  # once per driver and label, not once per lease object
        f"CREATE CONSTRAINT `ragkit.{w}:lock._ragkit_id.unique` IF NOT EXISTS FOR (n:`ragkit.{w}:lock`) "
        "REQUIRE n._ragkit_id IS UNIQUE"
        for w in ("w1", "w2")
    ]
    lease_runs = [(q, p) for q, p in runs if "`ragkit.w1:lock`" in q and not q.startswith("CREATE")]
    assert [sorted(p) for _, p in lease_runs] == [
        ["holder", "key", "ms", "token"], ["holder", "key", "ms", "token"],  # two acquires
        ["key", "ms", "token"],  # renew
        ["key"],  # holder
        ["key", "token"],  # release
        ["key", "ms", "token"],  # renew, with a ttl below a millisecond
    ]
    assert all(p["key"] == "writer" and p.get("token", me.token) == me.token for _, p in lease_runs)
    assert [p["ms"] for _, p in lease_runs if "ms" in p] == [30000, 30000, 12500, 1]  # never 0: no lease


async def test_on_neo4j_a_constraint_the_server_refuses_is_named(stub):
    def rows(query: str, params: dict) -> list[list]:
        if query.startswith("CREATE CONSTRAINT") and ":lock" in query:
            raise StubFailure("no constraints for you")
        return []

    server = stub("neo4j", rows)
    store = _store(server.uri, "w")
    await store.open()
    try:
        with pytest.raises(StoreError, match=rf"^Neo4j at {re.escape(server.uri)} failed to create the writer "
                                             r"lease's constraint: .*no constraints for you"):
            await asyncio.wait_for(store.writer_lease().acquire(Holder(), 30), 30)
    finally:
        await store.close()


@pytest.mark.parametrize(("call", "what"), [
    (lambda lease, me: lease.acquire(me, 30), "take the writer lease"),
    (lambda lease, me: lease.holder(), "read the writer lease"),
    (lambda lease, me: lease.renew(me, 30), "renew the writer lease"),
    (lambda lease, me: lease.release(me), "release the writer lease"),
])
async def test_a_lease_statement_the_server_rejects_names_the_operation(call, what):
    server = BoltStub("failing")
    store = _store(server.uri, "w")
    await store.open()
    try:
        with pytest.raises(StoreError, match=rf"^Neo4j at {re.escape(server.uri)} failed to {what}: "
                                             r".*the stub runs no query"):
            await asyncio.wait_for(call(store.writer_lease(), Holder()), 30)
    finally:
        await store.close()
        server.close()
