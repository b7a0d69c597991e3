"""What a store says when the server fails it: credentials refused, nothing
listening, a server that accepts and never answers, a call past
``query_timeout``, a query the server rejects. The real ``neo4j`` driver
talks Bolt to a loopback stub (``bolt_stub.py``) that fails on purpose,
since FalkorDB's listener checks no credentials and always answers.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time

import pytest

from bolt_stub import HELLO, PULL, RUN
from ragkit.errors import StoreError
from ragkit.protocols import StoreConfig
from ragkit_neo4j import Neo4jGraphStore, _server


def store(uri: str, **options) -> Neo4jGraphStore:
    return Neo4jGraphStore(StoreConfig(namespace="ns", workspace="w", options={"uri": uri, **options}))


def shared_drivers() -> dict:
    return dict(_server._drivers.get(asyncio.get_running_loop(), {}))


async def test_refused_credentials_name_the_fix_and_never_the_password(stub):
    server = stub("refuse-auth")
    graph = store(server.uri, user="neo4j", password="s3cret-Pa55")
    with pytest.raises(StoreError) as info:
        await graph.open()
    assert str(info.value) == (
        f"Neo4j at {server.uri} refused the credentials while trying to connect: The client is "
        "unauthorized due to authentication failure.; check user/password in [graph.options]"
    )
    assert "s3cret-Pa55" not in repr(info.value) + str(info.value.__cause__)
    assert not graph.is_open and shared_drivers() == {}


async def test_nothing_listening_is_a_store_error_asking_whether_the_server_runs():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        uri = f"bolt://127.0.0.1:{s.getsockname()[1]}"  # bound, never listening: refused
        graph = store(uri, connection_timeout=2.0)
        with pytest.raises(StoreError, match=rf"(?s)^cannot reach Neo4j at {re.escape(uri)} to connect: .*; "
                                             r"is the server running and the uri right\?$"):
            await graph.open()
    assert shared_drivers() == {}


async def test_a_server_that_never_answers_fails_open_within_connection_timeout(stub):
    """The driver's own limit covers the TCP connect only: without the store's,
    ``open()`` waited forever on a server that accepted and said nothing."""
    server = stub("silent")
    graph = store(server.uri, connection_timeout=0.5)
    start = time.perf_counter()
    with pytest.raises(StoreError) as info:
        await asyncio.wait_for(graph.open(), 30)
    assert time.perf_counter() - start < 10
    assert str(info.value) == (
        f"Neo4j at {server.uri} did not answer within 0.5 s (connection_timeout) while trying to connect; "
        "is a Bolt server listening there, and is it up?"
    )
    assert not graph.is_open and shared_drivers() == {}  # the half-made driver was closed


async def test_a_call_past_query_timeout_is_a_store_error_naming_it(stub):
    server = stub("hang-after-probe")
    graph = store(server.uri, query_timeout=0.5)
    await graph.open()
    try:
        for what, call in [("read nodes", lambda: graph.get_nodes(["a"])),
                           ("upsert nodes", lambda: graph.upsert_nodes({"a": {}}))]:
            start = time.perf_counter()
            with pytest.raises(StoreError) as info:
                await asyncio.wait_for(call(), 30)
            assert time.perf_counter() - start < 10
            assert str(info.value) == (
                f"Neo4j at {server.uri} did not answer within 0.5 s (query_timeout) while trying to {what}"
            )
    finally:
        await graph.close()


async def test_a_query_the_server_rejects_is_a_store_error_with_its_reason(stub):
    server = stub("failing")
    graph = store(server.uri)
    await graph.open()
    try:
        for what, call in [("read nodes", lambda: graph.get_nodes(["a"])),
                           ("upsert nodes", lambda: graph.upsert_nodes({"a": {}}))]:
            with pytest.raises(StoreError, match=rf"^Neo4j at {re.escape(server.uri)} failed to {what}: "
                                                 r".*Neo\.ClientError\.Statement\.SyntaxError.*the stub runs no query"):
                await asyncio.wait_for(call(), 30)
    finally:
        await graph.close()


# -- what the driver is told ---------------------------------------------------------


async def _three_reads(graph: Neo4jGraphStore) -> None:
    results = await asyncio.gather(graph.get_nodes(["a"]), graph.get_nodes(["b"]), graph.node_count(),
                                   return_exceptions=True)
    assert all(isinstance(r, StoreError) for r in results), results  # the stub fails every query


async def test_the_server_is_told_the_credentials_agent_database_and_fetch_size(stub):
    """HELLO carries the user agent and the basic credentials; every query names
    the database; reads ask for all their rows at once (``fetch_size=-1``:
    one round trip, not one per 1,000 rows)."""
    server = stub("failing")
    graph = store(server.uri, user="reader", password="pw-1", database="graphs")
    await graph.open()
    try:
        await _three_reads(graph)
    finally:
        await graph.close()
    hellos = server.sent(HELLO)  # one per connection
    assert hellos and all(
        hello == {"user_agent": "ragkit-neo4j", "scheme": "basic", "principal": "reader", "credentials": "pw-1"}
        for (hello,) in hellos
    )
    runs = server.sent(RUN)
    assert len(runs) == 4 and all(extra.get("db") == "graphs" for _, _, extra in runs)
    assert [fields[0]["n"] for fields in server.sent(PULL)][1:] == [-1, -1, -1]  # after the probe's


async def test_without_a_user_no_credentials_are_sent_and_a_user_alone_is_sent_as_such(stub):
    server = stub("failing")
    for options in ({}, {"user": "reader"}):
        graph = store(server.uri, **options)
        await graph.open()
        await graph.close()
    (anonymous,), (user_alone,) = server.sent(HELLO)
    assert "principal" not in anonymous and "credentials" not in anonymous
    assert anonymous.get("scheme", "none") == "none"
    assert (user_alone["scheme"], user_alone["principal"]) == ("basic", "reader")  # the driver leaves out an empty password


@pytest.mark.parametrize("size", [1, 3])
async def test_connections_are_pooled_up_to_max_connection_pool_size(stub, size):
    server = stub("failing")
    graph = store(server.uri, max_connection_pool_size=size)
    await graph.open()
    try:
        await _three_reads(graph)
    finally:
        await graph.close()
    assert server.connections == 1 if size == 1 else server.connections > 1


async def test_a_uri_the_driver_cannot_take_is_a_store_error_naming_it():
    graph = store("ftp://127.0.0.1:7687")
    with pytest.raises(StoreError, match=r"^cannot create a Neo4j driver for 'ftp://127\.0\.0\.1:7687': "):
        await graph.open()
    assert not graph.is_open and shared_drivers() == {}
