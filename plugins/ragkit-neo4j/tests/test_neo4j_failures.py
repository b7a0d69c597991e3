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

from bolt_stub import BoltStub
from ragkit.errors import StoreError
from ragkit.protocols import StoreConfig
from ragkit_neo4j import Neo4jGraphStore, _server


@pytest.fixture
def stub():
    made: list[BoltStub] = []

    def start(mode: str) -> BoltStub:
        made.append(BoltStub(mode))
        return made[-1]

    yield start
    for server in made:
        server.close()


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
