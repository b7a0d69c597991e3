"""QdrantVectorStore beyond the contract: options, ids, batching, workspace
isolation in one collection, persistence (folder and memory), dimension
checks, and the server code path (driven against a recording client, since
no Qdrant server runs here: CI covers local mode).

Troubleshoot: ``Recorder.calls`` lists every client call with its keyword
arguments; print it when a count or size assertion fails.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest
import qdrant_client
from qdrant_client import AsyncQdrantClient, models

from ragkit.errors import ConfigError, DimensionMismatchError, InvalidValueError, StoreError
from ragkit.protocols import StoreConfig
from ragkit.testing.contracts.base.contract import collect
from ragkit.testing.contracts.options import contract_options
from ragkit_qdrant import store as store_module
from ragkit_qdrant._filter import ID_KEY, WORKSPACE_KEY  # the payload keys, to read points as stored
from ragkit_qdrant.store import ID_NAMESPACE, QdrantVectorStore, point_id


def rows(n: int, d: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def config(tmp_path, *, workspace: str = "w", dimension: int = 4, namespace: str = "chunks", **options):
    return StoreConfig(namespace=namespace, workspace=workspace, working_dir=tmp_path,
                       options=options, dimension=dimension)


class Recorder:
    """Wraps a real client: forwards every call, records (name, kwargs)."""

    def __init__(self, client: AsyncQdrantClient) -> None:
        self.client = client
        self.calls: list[tuple[str, dict]] = []

    def __getattr__(self, name):
        target = getattr(self.client, name)
        if not callable(target):
            return target

        def call(*args, **kwargs):
            self.calls.append((name, kwargs))
            return target(*args, **kwargs)

        return call

    def sizes(self, name: str, arg: str) -> list[int]:
        out = []
        for n, kw in self.calls:
            if n == name:
                value = kw[arg]
                out.append(len(value.points if hasattr(value, "points") else value))
        return out


@pytest.fixture
async def opened(tmp_path):
    """``await opened(**options)``: an opened store, dropped and closed after the test."""
    made = []

    async def make(*, workspace: str = "w", dimension: int = 4, **options):
        store = QdrantVectorStore(config(tmp_path, workspace=workspace, dimension=dimension, **options))
        await store.open()
        made.append(store)
        return store

    yield make
    for store in made:
        if store.is_open:
            await store.drop()
            await store.close()


# -- options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"url": "http://q:6333", "path": "x"}, "only one of url, location, path"),
        ({"location": ":memory:", "path": "x"}, "only one of"),
        ({"api_key": "k"}, "api_key only apply with url"),
        ({"prefer_grpc": True}, "prefer_grpc only apply with url"),
        ({"exact": True, "path": "x"}, "exact only apply with url"),
        ({"location": "memory"}, "location"),
        ({"collection_prefix": "a b"}, "collection_prefix"),
        ({"urll": "http://q"}, "urll"),
    ],
)
def test_bad_options_are_config_errors(tmp_path, options, words):
    with pytest.raises(ConfigError, match=words):
        QdrantVectorStore(config(tmp_path, **options))


def test_modes_and_default_path(tmp_path):
    """No mode: local mode in ``<working_dir>/qdrant``; a relative path is under working_dir."""
    assert QdrantVectorStore(config(tmp_path)).path == (tmp_path / "qdrant").resolve()
    assert QdrantVectorStore(config(tmp_path, path="vec")).path == (tmp_path / "vec").resolve()
    assert QdrantVectorStore(config(tmp_path, location=":memory:")).mode == "memory"
    server = QdrantVectorStore(config(tmp_path, url="https://q.example:6333", api_key="secret"))
    assert server.mode == "server" and "secret" not in repr(server.options)


def test_contract_options(tmp_path, monkeypatch):
    """Local mode under tmp_path by default; RAGKIT_QDRANT_URL selects a server,
    and skips with a clear reason when none answers. The options come from the
    test side (``ragkit_qdrant.testing``, in the ``ragkit.testing`` entry points)."""
    monkeypatch.delenv("RAGKIT_QDRANT_URL", raising=False)
    assert contract_options("vector", "qdrant", tmp_path) == {"path": str(tmp_path / "qdrant")}
    monkeypatch.setenv("RAGKIT_QDRANT_URL", "http://127.0.0.1:1")
    with pytest.raises(pytest.skip.Exception, match="no Qdrant server answers at http://127.0.0.1:1"):
        contract_options("vector", "qdrant", tmp_path)


# -- ids ---------------------------------------------------------------------------------


async def test_ids_are_uuid5_with_the_original_in_the_payload(opened):
    """Point ids are ``uuid5(ID_NAMESPACE, "<workspace>/<id>")``; the payload keeps
    the original id and the workspace; get/ids/query give back the original."""
    store = await opened()
    await store.upsert(["doc-1", "中文 id"], rows(2), [{"k": 1}, {}])
    expected = str(uuid.uuid5(ID_NAMESPACE, "w/doc-1"))
    assert point_id("w", "doc-1") == expected != point_id("other", "doc-1")
    (point,) = await store.client.retrieve(store.collection_name, ids=[expected], with_payload=True)
    assert point.payload == {"k": 1, ID_KEY: "doc-1", WORKSPACE_KEY: "w"}
    assert sorted([i async for i in store.ids()]) == ["doc-1", "中文 id"]
    assert (await store.get(["doc-1"]))[0].metadata == {"k": 1}


@pytest.mark.parametrize(
    "meta", [{"_ragkit_id": "x"}, {"_ragkit_other": 1}, {'a"b': 1}, {"": 1}, {"big": 2**63}],
    ids=["id-key", "reserved-prefix", "quote", "empty", "int-too-big"],
)
async def test_metadata_qdrant_cannot_keep_is_refused(opened, meta):
    """Keys that clash with ragkit's payload fields or that a filter cannot
    address, and ints beyond 64 bits, raise and write nothing."""
    store = await opened()
    with pytest.raises(InvalidValueError, match="cannot be stored in Qdrant"):
        await store.upsert(["ok", "bad"], rows(2), [{"fine": 1}, meta])
    assert await store.count() == 0


# -- batching ----------------------------------------------------------------------------


async def test_requests_are_batched(opened):
    """``batch_size = 100``: 250 points go as upserts of 100, 100, 50 (each
    waited for), get/delete are chunked the same way, and ids() scrolls pages
    of 100."""
    store = await opened(batch_size=100)
    recorder = Recorder(store.client)
    store._client = recorder  # a spy around the real client: no public seam swaps the client
    ids = [f"id{i:03d}" for i in range(250)]
    await store.upsert(ids, rows(250), [{"i": i} for i in range(250)])
    assert recorder.sizes("upsert", "points") == [100, 100, 50]
    assert all(kw["wait"] is True for n, kw in recorder.calls if n == "upsert")
    got = await store.get(ids)
    assert [r.metadata["i"] for r in got] == list(range(250))
    assert recorder.sizes("retrieve", "ids") == [100, 100, 50]
    await store.delete(ids[:230])
    assert recorder.sizes("delete", "points_selector") == [100, 100, 30]
    assert sorted([i async for i in store.ids()]) == ids[230:]
    assert [kw["limit"] for n, kw in recorder.calls if n == "scroll"] == [100], "ids() scrolls pages of batch_size"
    store._client = recorder.client  # the real client back


# -- workspaces, persistence ------------------------------------------------------------------


async def test_workspaces_share_one_collection_and_stay_apart(opened):
    """Two workspaces live in one collection per namespace; same ids, separate
    points; drop deletes only its own workspace's points."""
    a = await opened(workspace="a")
    b = await opened(workspace="b")
    assert a.client is b.client  # one local client per folder in a process
    await a.upsert(["same"], [[1, 0, 0, 0]], [{"who": "a"}])
    await b.upsert(["same", "x"], [[0, 1, 0, 0], [0, 0, 1, 0]], [{"who": "b"}, {}])
    names = [c.name for c in (await a.client.get_collections()).collections]
    assert names == ["ragkit_chunks"]
    assert (await a.client.count("ragkit_chunks")).count == 3
    assert [h.metadata for h in await a.query([0, 1, 0, 0], 5)] == [{"who": "a"}]
    await a.drop()
    assert (await a.count(), await b.count()) == (0, 2)


async def test_local_folder_survives_another_process(tmp_path):
    """Points written by another process are read here once it has exited
    (local mode persists every write; the folder lock is released on exit)."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from ragkit.protocols import StoreConfig
        from ragkit_qdrant.store import QdrantVectorStore

        async def main():
            config = StoreConfig(namespace="chunks", workspace="w", working_dir={str(tmp_path)!r}, dimension=4)
            async with QdrantVectorStore(config) as store:
                await store.upsert(["a", "b"], [[1, 0, 0, 0], [0, 1, 0, 0]], [{{"v": 1}}, {{"v": 2.5}}])
                await store.upsert(["b"], [[0, 0, 1, 0]], [{{"flag": True}}])
                await store.delete(["a"])

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    async with QdrantVectorStore(config(tmp_path)) as store:
        assert await store.count() == 1
        a, b = await store.get(["a", "b"])
        assert a is None and b.metadata == {"flag": True} and np.allclose(b.vector, [0, 0, 1, 0])
        await store.drop()


async def test_a_locked_folder_is_a_store_error_with_a_hint(tmp_path):
    """A folder another process holds cannot be opened: the error says to use a server."""
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from qdrant_client import QdrantClient
            client = QdrantClient(path={str(tmp_path / 'qdrant')!r})
            print("ready", flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="already accessed.*use a Qdrant server"):
            await QdrantVectorStore(config(tmp_path)).open()
    finally:
        holder.kill()
        holder.wait()


async def test_memory_mode_lives_as_long_as_the_process(tmp_path):
    """``:memory:`` is one process-wide local client: a new instance sees what
    a closed one wrote (the contract's PERSISTENT, within the process)."""
    options = {"location": ":memory:", "collection_prefix": f"m{uuid.uuid4().hex[:8]}"}
    async with QdrantVectorStore(config(tmp_path, **options)) as first:
        await first.upsert(["a"], [[1, 0, 0, 0]], [{"v": 1}])
    async with QdrantVectorStore(config(tmp_path, **options)) as again:
        assert (await again.get(["a"]))[0].metadata == {"v": 1}
        await again.drop()


# -- dimensions --------------------------------------------------------------------------


async def test_another_dimension_opens_and_its_vectors_name_the_embedder(opened, tmp_path):
    """A store over a collection of another dimension opens, even for another
    workspace (they share the namespace's collection); reading or writing
    vectors fails with both dimensions, the embedder recorded in the collection
    and the fix, so the user knows which index to rebuild."""
    first = QdrantVectorStore(config(tmp_path, dimension=16).model_copy(update={"embedder": "big (big-16)"}))
    await first.open()
    try:
        await first.upsert(["a"], rows(1, 16))
        other = await opened(workspace="other", dimension=8)
        assert await other.count() == 0
        for call in (other.upsert(["b"], rows(1, 8)), other.query(rows(1, 8)[0], 1), other.get(["a"])):
            with pytest.raises(DimensionMismatchError) as err:
                await call
            message = str(err.value)
            assert "'ragkit_chunks'" in message and "dimension 16 made by the embedder big (big-16)" in message
            assert "dimension 8" in message
            assert message.endswith("or give this setup its own collection_prefix (every workspace of a namespace "
                                    "shares one collection), or delete the collection and re-index"), message
        elsewhere = await opened(workspace="other", dimension=8, collection_prefix="small")
        assert elsewhere.collection_name == "small_chunks"
    finally:
        await first.drop()
        await first.close()


async def test_wrong_dimension_writes_say_what_to_do(opened):
    store = await opened()
    with pytest.raises(DimensionMismatchError, match="dimension 5 but store .* dimension 4; use the same embedder"):
        await store.upsert(["a"], rows(1, 5))
    assert await store.count() == 0


async def test_a_foreign_collection_is_refused(tmp_path):
    """A collection with another distance (not made by ragkit) is not used."""
    options = {"location": ":memory:", "collection_prefix": f"f{uuid.uuid4().hex[:8]}"}
    store = QdrantVectorStore(config(tmp_path, **options))
    client = store_module._LocalClients.acquire(":memory:")
    await client.create_collection(store.collection_name,
                                   vectors_config=models.VectorParams(size=4, distance=models.Distance.DOT))
    with pytest.raises(StoreError, match="uses Dot distance; ragkit needs Cosine"):
        await store.open()
    await client.delete_collection(store.collection_name)


# -- the server code path ---------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect", "ignore:Local mode performs exact")
async def test_server_mode_passes_url_key_grpc_and_search_params(tmp_path, monkeypatch):
    """With ``url`` the store builds ``AsyncQdrantClient(url, api_key,
    prefer_grpc, ...)``, creates the workspace payload index (keyword,
    is_tenant), sends ``SearchParams(hnsw_ef, exact)``, waits for every write
    to be applied (the next read sees it) and closes its own client. The
    client here is a recording local one: no server runs in CI."""
    made: list[tuple[dict, Recorder]] = []

    def fake_client(**kwargs):
        recorder = Recorder(AsyncQdrantClient(location=":memory:"))
        made.append((kwargs, recorder))
        return recorder

    # The store imports the client class when it connects, from qdrant_client.
    monkeypatch.setattr(qdrant_client, "AsyncQdrantClient", fake_client)
    options = {"url": "https://q.example:6333", "api_key": "secret", "prefer_grpc": True,
               "timeout": 7, "hnsw_ef": 128, "exact": False}
    store = QdrantVectorStore(config(tmp_path, **options))
    await store.open()
    (kwargs, recorder), = made
    assert kwargs == {"url": "https://q.example:6333", "api_key": "secret", "prefer_grpc": True,
                      "grpc_port": 6334, "timeout": 7}
    index = [kw for n, kw in recorder.calls if n == "create_payload_index"]
    assert index and index[0]["field_schema"].is_tenant is True
    await store.upsert(["a", "b"], rows(2), [{"t": "x"}, {"t": "y"}])
    hits = await store.query(rows(1)[0], 1, filter={"t": "y"})
    assert [h.id for h in hits] == ["b"]
    (query,) = [kw for n, kw in recorder.calls if n == "query_points"]
    assert query["search_params"] == models.SearchParams(hnsw_ef=128, exact=False)
    assert sorted(r.id for page in await collect(store.records(10)) for r in page) == ["a", "b"]
    assert sorted([i async for i in store.ids()]) == ["a", "b"]
    scrolls = [kw for n, kw in recorder.calls if n == "scroll"]
    assert [kw["offset"] for kw in scrolls] == [None, None], "a scroll starts with no offset (a server refuses an empty id)"
    assert await store.count() == 2
    assert [kw.get("exact") for n, kw in recorder.calls if n == "count"] == [True], "a server counts exactly"
    await store.delete(["a"])
    await store.drop()
    writes = [(n, kw.get("wait")) for n, kw in recorder.calls if n in ("upsert", "delete")]
    assert writes == [("upsert", True), ("delete", True), ("delete", True)], "a server write waits until it is applied"
    await store.close()
    assert [n for n, _ in recorder.calls][-1] == "close"


class Refusing(Recorder):
    """A real client whose calls (their coroutines) fail as a server that
    refuses them would."""

    def __getattr__(self, name):
        target = super().__getattr__(name)
        if not callable(target):
            return target

        async def refused(*args, **kwargs):
            raise RuntimeError("refused by the test")

        return refused


async def test_a_failing_call_is_a_store_error_naming_the_operation_and_collection(opened):
    """Each operation's failure says which one failed, on which collection
    and where, with the client's own error."""
    store = await opened()
    await store.upsert(["a"], rows(1))
    client = store._client
    store._client = Refusing(client)
    where = f"on collection 'ragkit_chunks' (Qdrant (local) at {store.path}) failed: RuntimeError: refused by the test"
    calls = {
        "upsert": lambda: store.upsert(["b"], rows(1)),
        "delete": lambda: store.delete(["a"]),
        "get": lambda: store.get(["a"]),
        "count": store.count,
        "ids": lambda: collect(store.ids()),
        "records": lambda: collect(store.records(10)),
        "query": lambda: store.query(rows(1)[0], 1),
        "drop": store.drop,
    }
    try:
        for what, call in calls.items():
            with pytest.raises(StoreError) as caught:
                await call()
            assert str(caught.value) == f"{what} {where}", what
    finally:
        store._client = client


async def test_records_come_in_pages_of_the_batch_asked_for(opened):
    """``records(3)`` over 7 points: pages of 3, 3 and 1, one request each."""
    store = await opened()
    await store.upsert([f"p{i}" for i in range(7)], rows(7))
    recorder = Recorder(store.client)
    store._client = recorder  # a spy around the real client
    try:
        pages = await collect(store.records(3))
    finally:
        store._client = recorder.client
    assert [len(p) for p in pages] == [3, 3, 1]
    assert sorted(r.id for p in pages for r in p) == [f"p{i}" for i in range(7)]
    assert [kw["limit"] for n, kw in recorder.calls if n == "scroll"] == [3, 3, 3], "one request per page"
