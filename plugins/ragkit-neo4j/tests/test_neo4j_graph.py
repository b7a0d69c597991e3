"""ragkit-neo4j beyond the contract: hostile names, statement batching,
isolation by label, idempotent index creation, what the server is probed for,
and the Bolt stand-in's limits (values in pieces, no GOODBYE).

The contract itself runs from ragkit's ``tests/contract`` (``TestGraph_neo4j``).
Server tests need ``RAGKIT_NEO4J_URI`` (``scripts/bolt-server start``); the
codec tests at the bottom need no server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragkit.errors import ConfigError, InvalidValueError
from ragkit.protocols import StoreConfig
from ragkit.protocols.graph import edge_key
from ragkit_neo4j import Neo4jGraphStore
from ragkit_neo4j.cypher import (
    ID_KEY,
    assemble,
    decode_properties,
    encode_properties,
    literal,
    quote_ident,
    split_value,
    store_label,
)

HOSTILE = [
    "'", '"', "`", "\\", "\\'", "''", "``",
    "x'}) DETACH DELETE n //", "x`) DETACH DELETE n //", "'}) MATCH (m) DETACH DELETE m RETURN ('",
    "{", "}", "{}", "{rows}", "$rows", "$after", "${x}", "row[0]",
    "MATCH (n) DETACH DELETE n", "RETURN", "null", "NULL", "true", "UNWIND", "CALL db.indexes()",
    "a // comment", "/* c */", "line\nbreak", "tab\tin", "\r\n", "a\u2028b", "🙂", "中文 ключ",
    "_ragkit_id", "_ragkit_json", "_ragkitx41", "_ragkitp000000_x", "  spaced  ",
]


@contextlib.contextmanager
def bolt_runs():
    """Queries of every Bolt RUN message the driver sends (from its debug log)."""
    runs: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "C: RUN" in record.msg:
                runs.append(str(record.args[1])[:200])

    logger = logging.getLogger("neo4j.io")
    handler, level = Collect(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield runs
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def raw(store: Neo4jGraphStore, query: str) -> list[list]:
    """A parameterless query through the store's own driver."""
    async with store.driver.session(database=store.options.database, fetch_size=-1) as session:
        return await (await session.run(query)).values()


# -- what the server is --------------------------------------------------------------------


async def test_server_capabilities_are_probed_not_read_from_the_agent(graph):
    """FalkorDB's listener says ``Neo4j/5.13.0``; the probe finds out that it
    pastes parameters into the query text (a quote in a value breaks it), so
    the store sends escaped literals there and real parameters to Neo4j.

    Troubleshoot: see ``_server.probe``; force with ``query_values``.
    """
    info = graph.server
    try:
        async with graph.driver.session() as session:
            record = await (await session.run("RETURN $p AS v", {"p": "it's"})).single()
        params_work = record["v"] == "it's"
    except Exception:
        params_work = False
    assert info.inline_values is (not params_work)
    assert info.agent.startswith("Neo4j/")  # what both say: useless for telling them apart
    if info.product == "falkordb-bolt":
        assert info.goodbye_breaks_listener and not info.if_not_exists
    if info.product == "neo4j":
        assert info.if_not_exists and not info.inline_values


# -- names and values never become Cypher --------------------------------------------------------


async def test_hostile_ids_keys_and_values_round_trip_and_inject_nothing(graphs, make_config):
    """Node ids, property keys and values made of quotes, backticks, braces,
    placeholders, comments, Cypher keywords and reserved key names round-trip
    through every operation, and a store in another workspace is untouched.

    Troubleshoot: an id or value that reaches Cypher unescaped breaks the
    statement or changes its meaning; keys clashing with the adapter's own
    (``_ragkit...``) must be escaped by the codec.
    """
    canary = await graphs(make_config("canary"))
    await canary.upsert_edges([("c1", "c2", {"alive": True})])
    g = await graphs(make_config())
    props = {key: value for key, value in zip(HOSTILE, HOSTILE[::-1])}
    props["lists"] = HOSTILE[:10]
    await g.upsert_nodes({i: props for i in HOSTILE})
    ring = [(HOSTILE[i], HOSTILE[(i + 1) % len(HOSTILE)], {"k": HOSTILE[i], HOSTILE[i]: i}) for i in range(len(HOSTILE))]
    await g.upsert_edges(ring)
    assert await g.get_nodes(HOSTILE) == [props] * len(HOSTILE)
    assert await g.get_edges([(b, a) for a, b, _ in ring]) == [p for _, _, p in ring]
    assert await g.degrees(HOSTILE) == [2] * len(HOSTILE)
    assert await g.labels() == sorted(HOSTILE)
    assert {n.id: n.properties async for n in g.nodes()} == {i: props for i in HOSTILE}
    assert {e.key for e in [e async for e in g.edges()]} == {edge_key(a, b) for a, b, _ in ring}
    await g.delete_edges([(HOSTILE[1], HOSTILE[0])])
    await g.delete_nodes(HOSTILE[5:9])
    assert await g.node_count() == len(HOSTILE) - 4
    assert await canary.get_edge("c2", "c1") == {"alive": True}
    assert (await canary.node_count(), await canary.edge_count()) == (2, 1)


async def test_workspace_names_that_are_cypher_keywords(graphs, make_config):
    """Workspaces and namespaces named like Cypher keywords (valid ragkit names)
    make labels that work and stay apart.

    Troubleshoot: labels are always backtick-quoted (``store_label`` + ``quote_ident``).
    """
    tag = uuid.uuid4().hex[:6]
    a = await graphs(make_config("UNWIND", f"MATCH-{tag}"))
    b = await graphs(make_config("RETURN", f"DETACH-DELETE-{tag}"))
    await a.upsert_edge("x", "y", {"who": "a"})
    await b.upsert_edge("x", "y", {"who": "b"})
    assert (await a.get_edge("x", "y"), await b.get_edge("y", "x")) == ({"who": "a"}, {"who": "b"})
    assert a.label_name == f"ragkit.MATCH-{tag}.UNWIND"


def test_labels_come_from_a_whitelist():
    """``store_label`` refuses names outside the ``StoreConfig`` rule (even if a
    caller bypasses its validation), and ``.`` joins the parts so no two
    (workspace, namespace) pairs share a label.

    Troubleshoot: never build a label from text that skipped this check.
    """
    assert store_label("ragkit", "team-a", "chunks") == "ragkit.team-a.chunks"
    for bad in ["a`b", "a.b", "a b", "{x}", "", "-lead", "a\x00"]:
        with pytest.raises(InvalidValueError):
            store_label("ragkit", bad, "ns")
        with pytest.raises(InvalidValueError):
            store_label("ragkit", "ws", bad)
    with pytest.raises(InvalidValueError):
        store_label("rag.kit", "ws", "ns")
    with pytest.raises(InvalidValueError):
        quote_ident("a`b")
    bypass = StoreConfig.model_construct(
        namespace="ns", workspace="w`) DETACH DELETE n //", working_dir=".", options={}, dimension=None
    )
    with pytest.raises(InvalidValueError):
        Neo4jGraphStore(bypass)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40))
def test_string_literals_round_trip_any_text(neo4j_options, text):
    """Any text (no NUL, no lone surrogate) written as ``literal`` reads back
    unchanged from the server: the escaping is complete.

    Troubleshoot: only ``\\`` and ``'`` need escaping in a single-quoted
    Cypher string; escaping more changes the value on FalkorDB.
    """
    assert asyncio.run(_echo(neo4j_options, [literal(text)])) == [text]


@pytest.mark.parametrize(
    "values",
    [
        [0.0, -0.0, 1.5, 3.0, 1e16, 1e-5, 0.1 + 0.2, 1.7976931348623157e308, 2.2250738585072014e-308],
        [5e-324, -5e-324, 1e-310, 2.225073858507201e-308],  # subnormals: written as exact products
        [0, -1, 2**53 + 1, 2**63 - 1, -(2**63)],
        [True, False, [], ["a", "b"], [1, 2], [0.5, 1.5]],
    ],
)
def test_number_literals_round_trip_exactly(neo4j_options, values):
    """Floats (shortest repr, subnormals as exact products), 64-bit ints,
    booleans and lists come back with their exact value and type.

    Troubleshoot: FalkorDB's parser refuses subnormal literals; ``float_literal``
    writes them as (normal * 2**-600).
    """
    got = asyncio.run(_echo(neo4j_options, [literal(v) for v in values]))
    for want, have in zip(values, got):
        assert type(have) is type(want) and (have == want or (math.isnan(want) and math.isnan(have)))
        if isinstance(want, float):
            assert math.copysign(1, have) == math.copysign(1, want)


async def _echo(options: dict, literals: list[str]) -> list:
    store = Neo4jGraphStore(StoreConfig(namespace="echo", workspace="echo", options={**options, "indexes": "skip"}))
    await store.open()
    try:
        rows = await raw(store, "RETURN " + ", ".join(f"{text} AS v{i}" for i, text in enumerate(literals)))
        return rows[0]
    finally:
        await store.close()


# -- batching ----------------------------------------------------------------------------------


async def test_writes_and_batch_reads_send_one_unwind_per_batch(graphs, make_config):
    """250 nodes or edges with ``batch_size=100`` take 3 RUN messages per
    operation (100 + 100 + 50 rows), never one per row; scans take a page per
    ``batch_size`` ids.

    Troubleshoot: a per-row loop shows up as 250 RUNs; check ``_statements``
    and, for literals, that rows of one key set share a statement.
    """
    g = await graphs(make_config(batch_size=100))
    names = [f"n{i:03d}" for i in range(250)]
    with bolt_runs() as runs:
        await g.upsert_nodes({n: {"i": i, "tag": "x"} for i, n in enumerate(names)})
    assert len(runs) == 3 and all("UNWIND" in r for r in runs), runs
    operations = [
        lambda: g.upsert_edges([(n, "hub", {"w": 1.5}) for n in names]),
        lambda: g.get_nodes(names),
        lambda: g.get_edges([(n, "hub") for n in names]),
        lambda: g.degrees(names),
        lambda: g.nodes_edges(names),
    ]
    for op in operations:
        with bolt_runs() as runs:
            await op()
        assert len(runs) == 3, runs
    with bolt_runs() as runs:
        assert len([n async for n in g.nodes()]) == 251
    assert len(runs) == 3  # pages of 100, 100, 51
    with bolt_runs() as runs:
        await g.delete_nodes(names)
    assert len(runs) == 3
    assert await g.node_count() == 1


async def test_point_reads_come_back_in_few_records_each_within_a_message(graph):
    """On FalkorDB's listener the reads of a query's graph stage (nodes, edges,
    neighbours, degrees) return their rows grouped: far fewer records than rows
    (the driver's work per record was most of a read's time), yet no record
    past half a message, whatever a hub's neighbour count or an id's length.

    Troubleshoot: one record per row means ``_rows`` is not in the statement;
    a hang or a dropped connection means a group outgrew a message: check the
    budget in ``_rows`` (``limit // 8`` characters of JSON).
    """
    if graph.server.product != "falkordb-bolt" or not graph.server.inline_values:
        pytest.skip("rows are grouped only on FalkorDB's listener")
    others = [f"{i:04d}-" + "x" * 2_000 for i in range(120)]  # 240 KB of ids: many messages' worth
    await graph.upsert_nodes({"hub": {"k": "v"}, **{o: {"i": i} for i, o in enumerate(others)}})
    await graph.upsert_edges([("hub", o, {"w": i}) for i, o in enumerate(others)])
    few = [f"{i}" for i in range(60)]
    await graph.upsert_edges([("hub2", f, {}) for f in few])
    records: list[list] = []
    read = graph._read

    async def spy(what, query, params):
        got = await read(what, query, params)
        records.extend(got)
        return got

    graph._read = spy
    assert await graph.nodes_edges(["hub"]) == [sorted(edge_key("hub", o) for o in others)]
    assert await graph.degrees(["hub", "hub2", *few[:3], "none"]) == [120, 60, 1, 1, 1, 0]
    assert await graph.get_edges([("hub", o) for o in others[:50]]) == [{"w": i} for i in range(50)]
    assert await graph.get_nodes(["hub", *others[:5]]) == [{"k": "v"}, *({"i": i} for i in range(5))]
    longest = max(len(str(r).encode()) for r in records)
    assert longest <= graph._limit // 2, longest
    records.clear()
    assert len((await graph.nodes_edges(["hub2"]))[0]) == 60
    assert await graph.degrees(few) == [1] * 60
    assert len(records) == 2, len(records)  # 60 neighbours, 60 degrees: one record each


# -- isolation and schema ---------------------------------------------------------------------


async def test_workspaces_are_isolated_by_label(graphs, make_config):
    """Two workspaces with the same node ids hold separate nodes, each carrying
    exactly its store's label; dropping one leaves the other.

    Troubleshoot: every MATCH/MERGE must name the store's label (edges too).
    """
    a = await graphs(make_config("iso"))
    b = await graphs(make_config("iso"))
    await a.upsert_edges([("x", "y", {"ws": "a"})])
    await b.upsert_edges([("x", "y", {"ws": "b"}), ("x", "z", {})])
    rows = await raw(a, f"MATCH (n) WHERE n.{ID_KEY} = 'x' RETURN labels(n)")
    assert sorted(tuple(r[0]) for r in rows if r[0][0] in (a.label_name, b.label_name)) == sorted(
        [(a.label_name,), (b.label_name,)]
    )
    assert (await a.degree("x"), await b.degree("x")) == (1, 2)
    await a.drop()
    assert (await a.node_count(), await b.node_count(), await b.edge_count()) == (0, 3, 2)


async def test_index_creation_is_idempotent(graphs, make_config):
    """Creating the schema twice, and again from a second store (a new driver
    in another test would do the same), leaves exactly one index or constraint
    on ``_ragkit_id``.

    Troubleshoot: Neo4j uses ``IF NOT EXISTS``; other servers look in
    ``db.indexes()`` first and tolerate losing a creation race.
    """
    config = make_config("schema", indexes="create")
    g = await graphs(config)
    await g.ensure_schema(force=True)
    await g.ensure_schema(force=True)
    again = await graphs(config)
    await again.ensure_schema(force=True)
    assert await g.index_count() == 1


async def test_falkordb_index_trims_whitespace_so_auto_creates_none(graphs, make_config):
    """Why ``indexes="auto"`` creates no index on FalkorDB's listener: once an
    index exists, a lookup of ``"  spaced  "`` misses (the index trims
    surrounding whitespace) and ``MERGE`` makes a second node. Without the
    index the same writes keep one node.

    Troubleshoot: if this fails because the duplicate is gone, FalkorDB fixed
    its index; ``_wants_schema`` may then create it there too.
    """
    plain = await graphs(make_config("trim"))
    if plain.server.product != "falkordb-bolt":
        assert await plain.index_count() == 1  # Neo4j: auto creates the constraint
        return
    assert await plain.index_count() == 0
    indexed = await graphs(make_config("trim", indexes="create"))
    for store in (plain, indexed):
        await store.upsert_node("  spaced  ", {"v": 1})
        await store.upsert_node("  spaced  ", {"v": 2})
    assert (await plain.node_count(), await plain.get_node("  spaced  ")) == (1, {"v": 2})
    assert await indexed.node_count() == 2, "FalkorDB's index no longer trims whitespace"


# -- scans -----------------------------------------------------------------------------------


async def test_scans_are_keyset_pages_that_survive_concurrent_writes(graphs, make_config):
    """With 3 ids per page, ``nodes()``/``edges()`` yield every node and edge
    present for the whole scan exactly once while another store instance
    inserts and deletes nodes and edges sorting between them.

    Troubleshoot: pages must continue after the last id of the previous page in
    the server's own order (not Python's), never by offset.
    """
    config = make_config("scan", batch_size=3)
    g = await graphs(config)
    writer = await graphs(config)
    stable = [f"s{i:02d}" for i in range(0, 40, 2)] + ["中文", "🙂", "Ω", "~"]
    await g.upsert_nodes({s: {"stable": True} for s in stable})
    await g.upsert_edges([(s, "s00", {}) for s in stable[1:]])
    done = asyncio.Event()

    async def churn() -> None:
        i = 0
        while not done.is_set():
            name = f"s{(i * 7) % 40:02d}x"
            await writer.upsert_edges([(name, "s00", {}), (name, name, {})])
            await asyncio.sleep(0)
            await writer.delete_nodes([name])
            i += 1

    task = asyncio.create_task(churn())
    try:
        seen_nodes = [n.id async for n in g.nodes() if n.properties.get("stable")]
        seen_edges = [e.key async for e in g.edges() if "s00" in e.key and "x" not in e.key[0] + e.key[1]]
    finally:
        done.set()
        await task
    assert sorted(seen_nodes) == sorted(stable) and len(seen_nodes) == len(set(seen_nodes))
    assert sorted(seen_edges) == sorted(edge_key(s, "s00") for s in stable[1:])


# -- the stand-in's transport limits ------------------------------------------------------------


async def test_large_values_round_trip_in_pieces(graph):
    """Values far beyond the stand-in's 64 KB message limit (a 300 KB string,
    150,000 CJK characters, a 20,000-item list, a long mixed list in the JSON
    side channel) round-trip on nodes and edges; with literals they are stored
    as ``_ragkitp`` pieces and read back property by property.

    Troubleshoot: a hang here means a statement or a record over 64 KB reached
    FalkorDB's listener: check ``max_message_bytes`` and ``split_value``.
    """
    props = {
        "ascii": "a" * 300_000,
        "cjk": "描" * 150_000,
        "ids": [f"chunk-{i}" for i in range(20_000)],
        "mixed": [i if i % 2 else str(i) for i in range(20_000)],
        "small": 1,
    }
    await asyncio.wait_for(graph.upsert_node("big", props), 60)
    await asyncio.wait_for(graph.upsert_edge("big", "other", props), 60)
    assert await asyncio.wait_for(graph.get_node("big"), 60) == props
    assert await asyncio.wait_for(graph.get_edge("other", "big"), 60) == props
    if graph.server.inline_values:
        keys = (await raw(graph, f"MATCH (n:{quote_ident(graph.label_name)} {{{ID_KEY}: 'big'}}) RETURN keys(n)"))[0][0]
        assert any(k.startswith("_ragkitp") for k in keys) and "small" in keys


async def test_reopening_many_times_does_not_hang(make_config):
    """Opening and closing stores (each time a new driver with several pooled
    connections) never leaves the next connection hanging: on FalkorDB's
    listener the pool's sockets are dropped without GOODBYE.

    Troubleshoot: if a cycle takes ~connection_timeout, GOODBYE reached the
    listener (see ``_server._drop_connections``).
    """
    config = make_config("cycles", connection_timeout=5)
    for cycle in range(4):
        started = time.perf_counter()
        store = Neo4jGraphStore(config)
        await asyncio.wait_for(store.open(), 10)
        await asyncio.gather(*(store.upsert_node(f"n{cycle}-{i}", {"i": i}) for i in range(8)))
        await store.close()
        assert time.perf_counter() - started < 4, f"cycle {cycle} was slow: a connection hung"
    async with Neo4jGraphStore(config) as store:
        assert await store.node_count() == 32
        await store.drop()


class CuttingProxy:
    """A loopback TCP proxy to the Bolt server that can cut every connection
    through it at once, as a server dropping its clients' sockets does."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):  # the cut, or the peer's close
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def stop(self) -> None:
        self.cut()
        self.server.close()
        await self.server.wait_closed()


async def test_a_read_on_a_connection_the_server_dropped_runs_again(make_config, neo4j_options):
    """A pooled connection the server dropped fails the next statement sent on
    it ("Failed to read from defunct connection"); a read runs once more on a
    fresh connection instead of failing the indexer's or a query's call (the
    benchmark's server runs stopped on it). Writes are retried by the driver's
    managed transactions already.

    Troubleshoot: ``Neo4jGraphStore._read``'s retry.
    """
    from urllib.parse import urlparse

    uri = urlparse(neo4j_options["uri"])
    proxy = CuttingProxy(uri.hostname, uri.port)
    port = await proxy.start()
    try:
        config = make_config("dropped", uri=f"{uri.scheme}://127.0.0.1:{port}")
        async with Neo4jGraphStore(config) as store:
            try:
                await store.upsert_edges([("a", "b", {"w": 1})])
                assert await store.get_edges([("a", "b")]) == [{"w": 1}]
                proxy.cut()
                assert await store.get_edges([("b", "a")]) == [{"w": 1}]
                proxy.cut()
                assert await store.degrees(["a", "b", "c"]) == [1, 1, 0]
                # Several pooled connections dropped at once (the pool holds
                # those of concurrent reads): each is found dead only when used.
                reads = [store.get_edges([("a", "b")]) for _ in range(4)]
                assert await asyncio.gather(*reads) == [[{"w": 1}]] * 4
                proxy.cut()
                assert await store.get_nodes(["a"]) == [{}]
            finally:
                await store.drop()
    finally:
        await proxy.stop()


async def test_nul_in_ids_is_refused_only_where_the_server_cannot_store_it(graph):
    """NUL in an id cannot reach FalkorDB (C strings): it raises
    ``InvalidValueError`` there and writes nothing; NUL in values goes through
    the JSON side channel on every server.
    """
    await graph.upsert_node("v", {"text": "a\x00b", "list": ["x\x00"]})
    assert await graph.get_node("v") == {"text": "a\x00b", "list": ["x\x00"]}
    if graph.server.inline_values:
        with pytest.raises(InvalidValueError):
            await graph.upsert_nodes({"ok": {}, "a\x00b": {}})
        assert await graph.node_count() == 1
        assert await graph.get_node("a\x00b") is None


def test_options_are_validated(neo4j_options):
    """Password without user, unsafe label prefixes and relationship types are
    configuration errors."""
    for bad in [{"password": "x"}, {"label_prefix": "a.b"}, {"relationship_type": "R`"}, {"batch_size": 0}]:
        with pytest.raises(ConfigError):
            Neo4jGraphStore(StoreConfig(namespace="n", options={**neo4j_options, **bad}))


# -- codec (no server) ------------------------------------------------------------------------------


def test_codec_round_trips_reserved_keys_and_values_neo4j_cannot_store():
    """User keys that look like the adapter's own are escaped; mixed lists,
    NUL and ints beyond 64 bits go to the JSON side channel;
    decoding gives back exactly what was encoded.
    """
    props = {
        "_ragkit_id": "mine", "_ragkitx00": 1, "a`b": 2, "k\x00": 3, "plain": "v",
        "mixed": [1, 2.5, "x"], "nul": "a\x00b", "huge": 2**70,
        "ints": [1, 2], "floats": [1.0, 2.0], "empty": [],
    }
    stored = encode_properties(props)
    assert stored["plain"] == "v" and stored["ints"] == [1, 2] and "_ragkit_json" in stored
    assert not any("`" in k or "\x00" in k for k in stored)
    assert decode_properties(stored) == props


@pytest.mark.parametrize(
    "value", ["", "x" * 100_001, "描述" * 40_000, list(range(30_000)), [f"s{i}" for i in range(9_000)], []]
)
def test_split_values_reassemble(value):
    """``split_value`` cuts strings and lists into pieces under the limit;
    ``assemble`` joins them in index order whatever order they come in."""
    pieces = split_value(value, 15_000)
    assert all(len(literal(p).encode("utf-8")) <= 15_000 + 2 for p in pieces)
    pairs = [(f"_ragkitp{i:06d}_k", p) for i, p in enumerate(pieces)][::-1]
    assert assemble(pairs) == {"k": value}


async def test_parameter_mode_statements_are_valid_cypher(make_config, monkeypatch):
    """The statements sent with real query parameters (Neo4j's path) parse and
    behave, checked on the stand-in with values its parameter pasting handles
    (plain keys, ints, plain strings, tiny batches).

    Troubleshoot: this is the only check of the parameter path without a real
    Neo4j; a failure names the statement that does not parse.
    """
    from ragkit_neo4j import _server

    async def pretend_parameters(driver, database, forced):
        info = await driver.get_server_info()
        return _server.ServerInfo(str(info.agent), "other", goodbye_breaks_listener=True)

    monkeypatch.setattr(_server, "probe", pretend_parameters)
    async with Neo4jGraphStore(make_config("params", batch_size=2, indexes="skip")) as g:
        assert not g.server.inline_values
        try:
            await g.upsert_nodes({"a": {"x": 1, "s": "one"}, "b": {}, "c": {"x": 3}})
            await g.upsert_edges([("b", "a", {"w": 2}), ("c", "a", {}), ("c", "c", {"loop": 1})])
            assert await g.get_nodes(["a", "zz", "c"]) == [{"x": 1, "s": "one"}, None, {"x": 3}]
            assert await g.get_edges([("a", "b"), ("a", "c"), ("b", "c")]) == [{"w": 2}, {}, None]
            assert await g.degrees(["a", "c", "zz"]) == [2, 2, 0]
            assert await g.nodes_edges(["c", "zz"]) == [[("a", "c"), ("c", "c")], None]
            assert [n.id async for n in g.nodes()] == ["a", "b", "c"]
            assert [e.key async for e in g.edges()] == [("a", "b"), ("a", "c"), ("c", "c")]
            await g.delete_edges([("a", "b")])
            await g.delete_nodes(["c"])
            assert (await g.node_count(), await g.edge_count()) == (2, 0)
        finally:
            await g.drop()
