"""What a store learns about the server behind it (``_server``): the probe of
query parameters and of the version, what each query-values mode sends, one
driver shared per event loop and closed on it (or after it ended), and closing
a listener's connections without GOODBYE.

The server is the loopback stub answering as Neo4j (``bolt_stub.py``, mode
``neo4j``), which can say another version or return a probe value changed.

Troubleshoot: ``ragkit_neo4j/_server.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from types import SimpleNamespace

import pytest

from bolt_stub import RUN, BoltStub
from ragkit.errors import StoreError
from ragkit.protocols import StoreConfig
from ragkit_neo4j import Neo4jGraphStore, _server


def _store(uri: str, **options) -> Neo4jGraphStore:
    return Neo4jGraphStore(StoreConfig(namespace="ns", workspace="w", options={"uri": uri, **options}))


async def _probed(server: BoltStub, **options) -> _server.ServerInfo:
    store = _store(server.uri, **options)
    await store.open()
    try:
        return store.server
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("versions", "if_not_exists"),
    [(["5.26.0"], True), (["4.4.0"], True), (["4.4"], True), (["5"], True), (["4.4.12-aura", "x"], True),
     (["4.3.23"], False), (["3.5.35"], False), (["4.x"], False), ([], False)],
)
async def test_neo4j_from_4_4_gets_if_not_exists(stub, versions, if_not_exists):
    """``dbms.components()`` names the version (the first); ``IF NOT EXISTS`` came with 4.4."""
    info = await _probed(stub("neo4j", versions=tuple(versions)))
    version = versions[0] if versions else ""
    assert info == _server.ServerInfo("Neo4j/5.26.0", "neo4j", version, if_not_exists=if_not_exists)


@pytest.mark.parametrize(("version", "wanted", "expected"), [
    ("4.x", (4, 1), False),  # a part without digits counts as 0
    ("x.5", (0, 5), True),
    ("4.4.0", (4, 4), True),
    ("4.3.99", (4, 4), False),
    ("10.0", (4, 4), True),  # numbers, not text
])
def test_version_parts_are_compared_as_numbers(version, wanted, expected):
    assert _server._version_at_least(version, wanted) is expected


async def test_a_server_that_changes_the_probe_value_gets_literals(stub):
    """A server that returns the probe's value altered (its parameters pasted
    into the query and read back, the backslash lost) is sent literals."""
    info = await _probed(stub("neo4j", echo=lambda value: value.replace("\\", "")))
    assert info == _server.ServerInfo("Neo4j/5.26.0", "falkordb-bolt", inline_values=True,
                                      goodbye_breaks_listener=True)
    server = stub("neo4j", echo=lambda value: value.replace("\\", ""))
    with pytest.raises(StoreError, match=r'does not return query parameters unchanged; set query_values = "auto"'):
        await _probed(server, query_values="parameters")


async def test_query_values_inline_sends_no_parameter_at_all(stub):
    """``query_values = "inline"`` is for servers that mishandle parameters:
    not even the probe sends one."""
    server = stub("neo4j")
    store = _store(server.uri, query_values="inline")
    await store.open()
    try:
        assert store.server.inline_values
        await store.upsert_nodes({"a": {"x": 1}})
        assert await store.get_node("a") is None  # the stub stores nothing: what was sent matters
    finally:
        await store.close()
    runs = server.sent(RUN)
    assert runs and all(params == {} for _, params, *_ in runs), [r for r in runs if r[1]]


async def test_a_server_without_dbms_components_is_other(stub, caplog):
    """Parameters work but ``dbms.components()`` fails: not Neo4j, no ``IF NOT
    EXISTS``; why is in the debug log."""
    with caplog.at_level(logging.DEBUG, logger="ragkit_neo4j"):
        info = await _probed(stub("neo4j", versions=None))
    assert info == _server.ServerInfo("Neo4j/5.26.0", "other")
    [message] = [r.getMessage() for r in caplog.records if "dbms.components" in r.getMessage()]
    assert message.startswith("dbms.components() failed on Neo4j/5.26.0: CypherSyntaxError: ")
    assert "no procedure" in message


class _Conn:
    def __init__(self, kill: bool) -> None:
        self.killed = 0
        if kill:
            self.kill = lambda: setattr(self, "killed", self.killed + 1)


def _driver(connections) -> SimpleNamespace:
    """Laid out as the neo4j driver's pool is (``_pool.connections``: address -> list)."""
    return SimpleNamespace(_pool=SimpleNamespace(connections=connections))


def test_dropping_connections_kills_each_and_warns_where_it_cannot(caplog):
    """Without GOODBYE: each pooled connection is killed; a driver laid out
    otherwise is closed normally, with a warning saying so."""
    conns = [_Conn(True), _Conn(True), _Conn(False)]
    with caplog.at_level(logging.WARNING, logger="ragkit_neo4j"):
        _server._drop_connections(_driver({"a": conns[:2], "b": conns[2:]}))
        assert [c.killed for c in conns] == [1, 1, 0]
        assert [r.getMessage() for r in caplog.records] == [
            "driver connection has no kill(); it will close with GOODBYE"
        ]
        caplog.clear()
        _server._drop_connections(object())
        _server._drop_connections(_driver(None))
        assert [r.getMessage() for r in caplog.records] == [
            "cannot reach the driver's connections; closing with GOODBYE"
        ] * 2


async def test_a_failed_parameter_probe_is_logged_at_debug(stub, caplog):
    """Why a server was taken for one without parameters is in the debug log:
    the agent it announced and the error its probe met."""
    server = stub("failing")  # fails every query, the probe first
    with caplog.at_level(logging.DEBUG, logger="ragkit_neo4j"):
        info = await _probed(server, indexes="skip")
    assert info.inline_values
    [message] = [r.getMessage() for r in caplog.records if "probe" in r.getMessage()]
    assert message.startswith("parameter probe failed on Neo4j/5.26.0: CypherSyntaxError: ")
    assert "the stub runs no query" in message


async def test_stores_of_one_loop_share_one_driver_probed_once_until_the_last_closes(stub):
    """Stores on one server share a driver (probed once); closing one leaves it
    working for the others, closing the last closes it and forgets it."""
    server = stub("neo4j")
    first = Neo4jGraphStore(StoreConfig(namespace="a", workspace="w", options={"uri": server.uri}))
    second = Neo4jGraphStore(StoreConfig(namespace="b", workspace="w", options={"uri": server.uri}))
    await first.open()
    await second.open()
    shared = first._shared
    try:
        assert second._shared is shared and shared.users == 2
        assert _server._drivers[asyncio.get_running_loop()][shared.key] is shared
        await first.close()
        assert shared.users == 1
        assert await second.get_node("x") is None  # its driver still open
    finally:
        await first.close()
        await second.close()
    assert shared.key not in _server._drivers[asyncio.get_running_loop()]
    assert [q for q, *_ in server.sent(RUN) if q.startswith("RETURN $p")] == ["RETURN $p AS v"]


def test_a_store_is_closed_on_its_own_loop_or_after_that_loop_ended(stub):
    """``asyncio.run(open)`` then ``asyncio.run(close)`` works: the connections
    ended with the first loop. Closing while that loop still runs elsewhere is
    refused, and the store stays open for its own loop to close."""
    server = stub("neo4j")
    ended = _store(server.uri)
    asyncio.run(ended.open())
    asyncio.run(ended.close())
    assert ended._shared is None

    own = asyncio.new_event_loop()
    thread = threading.Thread(target=own.run_forever, daemon=True)
    thread.start()
    live = _store(server.uri)
    try:
        asyncio.run_coroutine_threadsafe(live.open(), own).result(30)
        with pytest.raises(RuntimeError, match=r"^a Neo4j store was closed on another event loop than the one it "
                                               r"opened on, whose connections it holds\. Fix: close it on that loop "
                                               r"\(or after that loop has ended\)$"):
            asyncio.run(live.close())
        assert live.is_open and live._shared.users == 1
        asyncio.run_coroutine_threadsafe(live.close(), own).result(30)
        assert live._shared is None and not _server._drivers.get(own)
    finally:
        own.call_soon_threadsafe(own.stop)
        thread.join(10)
        own.close()


async def test_both_probes_ask_the_configured_database(stub):
    """The parameter probe and ``dbms.components()`` run in the database the
    store is configured with, as every later query does."""
    server = stub("neo4j")
    info = await _probed(server, database="graphs", indexes="skip")
    assert info.product == "neo4j"
    probes = [(q, extra) for q, _, extra in server.sent(RUN) if q.startswith(("RETURN $p", "CALL dbms.components"))]
    assert [q.split()[0] for q, _ in probes] == ["RETURN", "CALL"]
    assert all(extra.get("db") == "graphs" for _, extra in probes)
