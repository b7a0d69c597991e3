"""ChromaVectorStore beyond the contract: options, batching, never embedding,
isolation in one server, persistence across processes, dimension checks,
group commit, and the ``chroma-server`` script. Most tests run in both modes
(``mode`` is ``embedded`` or ``http``; see conftest.py for the server).

Troubleshoot: ``CallLog`` records every Chroma collection call with its
arguments; print ``calls.calls`` when a count or size assertion fails.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
import uuid
from urllib.parse import urlsplit

import numpy as np
import pytest
from chromadb.api.models.Collection import Collection

from ragkit.errors import ConfigError, DimensionMismatchError, InvalidValueError, StoreError
from ragkit.protocols import StoreConfig
from ragkit.testing.contracts.base.contract import collect
from ragkit.testing.contracts.options import contract_options
from ragkit_chroma.store import ChromaHttpVectorStore, ChromaVectorStore, collection_name
from ragkit_chroma.testing import options_from_url
from recording_proxy import RecordingProxy

# Chroma 1.5 warns whenever it reads a collection made with no embedding function,
# which is exactly what ragkit wants (it always passes embeddings).
pytestmark = pytest.mark.filterwarnings("ignore:legacy embedding function config:DeprecationWarning")


class CallLog:
    """Wraps Collection methods to record (method, kwargs) of every call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
        self.calls: list[tuple[str, dict]] = []
        for name in names:
            original = getattr(Collection, name)

            def wrapper(self_, *args, _name=name, _original=original, **kwargs):
                self.calls.append((_name, kwargs))
                return _original(self_, *args, **kwargs)

            monkeypatch.setattr(Collection, name, wrapper)

    def sizes(self, name: str, arg: str = "ids") -> list[int]:
        return [len(kw[arg]) for n, kw in self.calls if n == name and kw.get(arg) is not None]


def rows(n: int, d: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


# -- options -------------------------------------------------------------------------


def config(**options) -> StoreConfig:
    return StoreConfig(namespace="chunks", options=options, dimension=4)


def test_mode_follows_the_options():
    """No option: embedded; any server option: http; ``chroma-http``: http."""
    assert ChromaVectorStore(config()).options.mode == "embedded"
    assert ChromaVectorStore(config(host="db.internal")).options.mode == "http"
    assert ChromaVectorStore(config(port=8001)).url == "http://localhost:8001"
    assert ChromaHttpVectorStore(config()).options.mode == "http"
    assert ChromaVectorStore(config(ssl=True, host="h")).url == "https://h:8000"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"mode": "embedded", "host": "h"}, "host only apply to mode = 'http'"),
        ({"mode": "http", "path": "x"}, "path only applies to mode = 'embedded'"),
        ({"collection_prefix": "bad.prefix"}, "collection_prefix"),
        ({"batch_size": 0}, "batch_size"),
        ({"hots": "typo"}, "hots"),
    ],
)
def test_bad_options_are_config_errors(options, words):
    """Contradictory or misspelled options fail when the store is built."""
    with pytest.raises(ConfigError, match=words):
        ChromaVectorStore(config(**options))


def test_chroma_http_rejects_a_path():
    with pytest.raises(ConfigError, match="path only applies"):
        ChromaHttpVectorStore(config(path="x"))


def test_auth_token_is_secret():
    """The token never shows in the options' repr (nor in error messages)."""
    store = ChromaVectorStore(config(auth_token="s3cret", headers={"X-Chroma-Token": "h3ader"}, host="h"))
    assert "s3cret" not in repr(store.options) and "h3ader" not in repr(store.options)
    assert store.options.headers["X-Chroma-Token"].get_secret_value() == "h3ader"


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("ragkit", "default", "chunks"), "ragkit.default.chunks"),
        (("ragkit", "w-1", "ns_"), "ragkit.w-1.ns_.0"),
        (("ragkit", "w", "ns-"), "ragkit.w.ns-.0"),
        (("p", "w_", "n"), "p.w_.n"),
    ],
)
def test_collection_names(args, name):
    """``<prefix>.<workspace>.<namespace>``, ``.0`` appended when Chroma needs
    a letter or digit at the end (``.`` never occurs in ragkit names)."""
    assert collection_name(*args) == name


def test_options_from_url():
    assert options_from_url("http://127.0.0.1:8000") == {"host": "127.0.0.1", "port": 8000, "ssl": False}
    assert options_from_url("https://chroma.example") == {"host": "chroma.example", "port": 443, "ssl": True}
    with pytest.raises(ValueError):
        options_from_url("127.0.0.1:8000")


def test_contract_options_skip_with_a_clear_reason(monkeypatch, free_port, tmp_path):
    """No server at RAGKIT_CHROMA_URL: the contract skips (the contract's
    conftest turns that into a failure when RAGKIT_CONTRACT_REQUIRE names it).
    The options come from the test side (``ragkit_chroma.testing``, registered
    in the ``ragkit.testing`` entry-point group); embedded Chroma needs none."""
    monkeypatch.setenv("RAGKIT_CHROMA_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(pytest.skip.Exception, match="no Chroma server answers at .*chroma-server start"):
        contract_options("vector", "chroma-http", tmp_path)
    assert contract_options("vector", "chroma", tmp_path) == {}


async def test_unreachable_server_is_a_store_error_with_a_hint(free_port):
    store = ChromaVectorStore(config(host="127.0.0.1", port=free_port()))
    with pytest.raises(StoreError, match=r"(?s)^cannot open Chroma at http://127\.0\.0\.1:\d+: \w+: .*; start a server "
                                         r"\(`chroma run --path DIR --host 127\.0\.0\.1 --port 8000`\) or fix "
                                         r"host/port/ssl/auth_token in \[vector\.options\]$"):
        await store.open()
    assert not store.is_open


# -- batching ------------------------------------------------------------------------


async def test_writes_and_reads_are_batched_by_batch_size(make_store, mode, monkeypatch):
    """With ``batch_size = 100``, 250 records go in requests of 100, 100, 50
    (upsert, the metadata look-up before it, get and delete)."""
    store = await make_store(mode, batch_size=100)
    calls = CallLog(monkeypatch, "upsert", "get", "delete")
    ids = [f"id{i:03d}" for i in range(250)]
    await store.upsert(ids, rows(250), [{"i": i} for i in range(250)])
    assert calls.sizes("upsert") == [100, 100, 50]
    assert calls.sizes("get") == [100, 100, 50]
    # The look-up before an upsert asks for the old metadata only (no documents).
    assert [kw.get("include") for name, kw in calls.calls if name == "get"] == [["metadatas"]] * 3
    assert await store.count() == 250
    calls.calls.clear()
    got = await store.get(ids)
    assert [r.metadata["i"] for r in got] == list(range(250))
    assert calls.sizes("get") == [100, 100, 50]
    # Three pages of ids: each request starts where the last ended (at most
    # 251 taken, so a scan that asks for one page again fails rather than hangs).
    scanned = []
    async for id_ in store.ids():
        scanned.append(id_)
        if len(scanned) > 250:
            break
    assert sorted(scanned) == ids
    await store.delete(ids[:230])
    assert calls.sizes("delete") == [100, 100, 30]
    calls.calls.clear()
    assert sorted([i async for i in store.ids()]) == ids[230:]
    # The ids scan asks for pages of batch_size, and for nothing but the ids.
    assert [(kw["limit"], kw.get("include")) for name, kw in calls.calls if name == "get"] == [(100, [])]


async def test_upsert_beyond_max_batch_size(make_store, mode, monkeypatch):
    """One upsert of ``max_batch_size + 7`` records is split at the client's
    ``max_batch_size``; every record is stored and searchable."""
    store = await make_store(mode)
    limit = store.client.get_max_batch_size()
    n = limit + 7
    calls = CallLog(monkeypatch, "upsert")
    m = rows(n, seed=1)
    ids = [f"big-{i:05d}" for i in range(n)]
    await store.upsert(ids, m)
    assert calls.sizes("upsert") == [limit, 7]
    assert await store.count() == n
    assert len({i async for i in store.ids()}) == n
    hits = await store.query(m[-1], 1)
    assert [h.id for h in hits] == [ids[-1]]


# -- Chroma never embeds -------------------------------------------------------------


async def test_chroma_never_embeds(make_store, mode, monkeypatch):
    """Collections have no embedding function; writes send embeddings and no
    documents, queries send query_embeddings and never query_texts. Chroma's
    embedding functions are made to fail, so any embedding attempt would show."""
    from chromadb.utils import embedding_functions as ef

    def refuse(*args, **kwargs):
        raise AssertionError("Chroma tried to embed")

    monkeypatch.setattr(ef.DefaultEmbeddingFunction, "__call__", refuse)
    monkeypatch.setattr(ef.ONNXMiniLM_L6_V2, "__call__", refuse)
    calls = CallLog(monkeypatch, "upsert", "query")
    store = await make_store(mode)
    await store.upsert(["a", "b"], rows(2), [{"t": "x"}, {}])
    hits = await store.query(rows(1)[0], 2, filter={"t": "x"})
    assert [h.id for h in hits] == ["a"]
    collection = store.client.get_collection(store.collection_name, embedding_function=None)
    assert collection.configuration.get("embedding_function") is None
    for name, kwargs in calls.calls:
        if name == "upsert":
            assert kwargs["embeddings"] is not None and kwargs.get("documents") is None
        else:
            assert kwargs["query_embeddings"] is not None and kwargs.get("query_texts") is None
            # Chroma's default would send each hit's document too (always empty here).
            assert kwargs["include"] == ["metadatas", "distances"]


async def test_a_min_score_cut_ends_the_search_at_the_first_request(make_store, mode, monkeypatch):
    """40 records tie at a score below ``min_score``: the first request shows
    none can pass it, so the store does not ask again for more ties (without
    ``min_score`` it asks twice as many until the ties end: 12, 24, 48)."""
    store = await make_store(mode)
    same = np.tile(np.array([[1.0, 1.0, 0.0, 0.0]], dtype=np.float32), (40, 1))
    await store.upsert([f"t{i:02d}" for i in range(40)], same)
    calls = CallLog(monkeypatch, "query")
    assert await store.query(np.array([1.0, 0.0, 0.0, 0.0]), 2, min_score=0.9) == []
    assert [kw["n_results"] for _, kw in calls.calls] == [12]
    calls.calls.clear()
    assert len(await store.query(np.array([1.0, 0.0, 0.0, 0.0]), 2)) == 2
    assert [kw["n_results"] for _, kw in calls.calls] == [12, 24, 48]


# -- isolation and persistence ---------------------------------------------------------


async def test_workspaces_are_isolated_in_one_database(make_store, mode):
    """Two workspaces (one server, or one embedded folder) keep separate
    collections under the same ids; dropping one leaves the other intact."""
    a = await make_store(mode)
    b = await make_store(mode)
    await a.upsert(["same"], [[1, 0, 0, 0]], [{"who": "a"}])
    await b.upsert(["same", "other"], [[0, 1, 0, 0], [0, 0, 1, 0]], [{"who": "b"}, {}])
    assert a.collection_name != b.collection_name
    names = {c.name for c in a.client.list_collections()}
    assert {a.collection_name, b.collection_name} <= names
    assert (await a.get(["same"]))[0].metadata == {"who": "a"}
    await b.drop()
    assert await b.count() == 0
    assert b.collection_name not in {c.name for c in a.client.list_collections()}
    assert [h.id for h in await a.query([1, 0, 0, 0], 5)] == ["same"]


async def test_embedded_data_survives_another_process(tmp_path):
    """Records written by one process (then closed) are read back by a new
    store in this process: nothing lives only in memory."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from ragkit.protocols import StoreConfig
        from ragkit_chroma.store import ChromaVectorStore

        async def main():
            config = StoreConfig(namespace="chunks", workspace="w", working_dir={str(tmp_path)!r}, dimension=4)
            async with ChromaVectorStore(config) as store:
                await store.upsert(["a", "b", "中文"], [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]],
                                   [{{"v": 1}}, {{"v": 2, "flag": True}}, {{"t": "🙂"}}])
                await store.upsert(["b"], [[0, 0, 0, 1]], [{{"v": 3}}])
                await store.delete(["a"])

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    config = StoreConfig(namespace="chunks", workspace="w", working_dir=tmp_path, dimension=4)
    async with ChromaVectorStore(config) as store:
        assert store.path == (tmp_path / "chroma").resolve()
        assert await store.count() == 2
        a, b, zh = await store.get(["a", "b", "中文"])
        assert a is None and b.metadata == {"v": 3} and zh.metadata == {"t": "🙂"}
        assert np.allclose(b.vector, [0, 0, 0, 1])
        assert [h.id for h in await store.query([0, 0, 0, 1], 1)] == ["b"]


async def test_a_dropped_collection_is_looked_up_again(make_store, mode):
    """An instance whose collection another instance dropped and recreated
    keeps working (Chroma addresses collections by id, not by name)."""
    a = await make_store(mode)
    await a.upsert(["x"], [[1, 0, 0, 0]])
    b = await make_store(mode, workspace=a.workspace)
    await b.drop()
    await b.upsert(["y"], [[0, 1, 0, 0]])
    assert [i async for i in a.ids()] == ["y"]
    await a.upsert(["z"], [[0, 0, 1, 0]])
    assert await b.count() == 2


@pytest.mark.parametrize("space", ["l2", "ip"])
async def test_a_collection_in_another_space_is_refused_untouched(make_store, mode, space):
    """A collection of the store's name that another tool made in the ``l2`` or
    ``ip`` space (scores would not be cosine) is refused, naming the space and
    the fix, and nothing is written to it."""
    store = await make_store(mode)
    foreign = store.client.create_collection(store.collection_name, configuration={"hnsw": {"space": space}},
                                             embedding_function=None)
    with pytest.raises(StoreError, match=rf"uses the '{space}' space; ragkit needs 'cosine'.*choose another collection_prefix$"):
        await store.upsert(["a"], rows(1))
    assert foreign.count() == 0


# -- dimensions and metadata ---------------------------------------------------------


async def test_another_dimension_opens_and_its_vectors_name_the_embedder(make_store, mode):
    """A store over a collection of another dimension opens (ids are counted);
    reading or writing vectors fails with both dimensions, the collection, the
    embedder recorded in it and the fix, so the user knows which index to rebuild."""
    first = await make_store(mode, dimension=16, open=False)
    first.config = first.config.model_copy(update={"embedder": "big (big-16)"})
    await first.open()
    await first.upsert(["a"], rows(1, 16))
    other = await make_store(mode, workspace=first.workspace, dimension=8)
    assert await other.count() == 1
    for call in (other.upsert(["b"], rows(1, 8)), other.query(rows(1, 8)[0], 1), other.get(["a"])):
        with pytest.raises(DimensionMismatchError) as err:
            await call
        message = str(err.value)
        assert "dimension 16 made by the embedder big (big-16)" in message and "dimension 8" in message
        assert first.collection_name in message and "re-index" in message


async def test_wrong_dimension_writes_say_what_to_do(make_store, mode):
    store = await make_store(mode, dimension=4)
    with pytest.raises(DimensionMismatchError, match="dimension 5 but store .* dimension 4; use the same embedder"):
        await store.upsert(["a"], rows(1, 5))
    with pytest.raises(DimensionMismatchError, match="query vector has dimension 3"):
        await store.query([1, 0, 0], 1)
    assert await store.count() == 0


@pytest.mark.parametrize(
    "meta",
    [{"#document": "x"}, {"$and": 1}, {"chroma:x": 1}, {"": 1}, {"big": 2**63}, {"small": -(2**63) - 1}],
    ids=["hash", "dollar", "chroma-prefix", "empty", "int-too-big", "int-too-small"],
)
async def test_metadata_chroma_cannot_keep_is_refused(make_store, meta):
    """Keys Chroma refuses or drops, and ints it would turn into floats, raise
    InvalidValueError and write nothing of the batch."""
    store = await make_store("embedded")
    with pytest.raises(InvalidValueError, match="cannot be stored in Chroma"):
        await store.upsert(["ok", "bad"], rows(2), [{"fine": 1}, meta])
    assert await store.count() == 0


async def test_upsert_replaces_metadata_in_chroma_itself(make_store, mode):
    """Chroma merges metadata on upsert; the store clears the keys the new
    metadata lacks, so the collection itself holds exactly the new metadata."""
    store = await make_store(mode)
    await store.upsert(["a", "b"], rows(2), [{"x": 1, "y": 2}, {"z": True}])
    await store.upsert(["a", "b"], rows(2), [{"x": 3}, {}])
    raw = store.client.get_collection(store.collection_name, embedding_function=None)
    got = raw.get(ids=["a", "b"], include=["metadatas"])
    assert dict(zip(got["ids"], got["metadatas"])) == {"a": {"x": 3}, "b": None}


# -- group commit ----------------------------------------------------------------------


async def test_concurrent_writes_are_committed_together(make_store, monkeypatch):
    """40 concurrent single-record upserts reach Chroma in far fewer upsert
    calls (one per group of queued writes), and each caller's write lands."""
    store = await make_store("embedded")
    calls = CallLog(monkeypatch, "upsert")
    await asyncio.gather(*(store.upsert([f"k{i}"], rows(1, seed=i), [{"i": i}]) for i in range(40)))
    assert await store.count() == 40
    assert len(calls.sizes("upsert")) <= 3, calls.sizes("upsert")
    assert [r.metadata for r in await store.get(["k0", "k39"])] == [{"i": 0}, {"i": 39}]


async def test_writes_queued_after_a_drop_survive_it(make_store):
    """upsert a, drop, upsert b issued at once: the drop applies between them."""
    store = await make_store("embedded")
    await asyncio.gather(
        store.upsert(["a"], [[1, 0, 0, 0]]),
        store.drop(),
        store.upsert(["b"], [[0, 1, 0, 0]]),
        store.delete(["never"]),
    )
    assert [i async for i in store.ids()] == ["b"]


async def test_a_failed_group_fails_every_caller(make_store, monkeypatch):
    """A backend failure reaches every caller whose write was in the group, as
    a StoreError naming the collection; the store keeps working afterwards."""
    store = await make_store("embedded")
    await store.upsert(["seed"], [[1, 0, 0, 0]])
    original = Collection.upsert

    def broken(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Collection, "upsert", broken)
    results = await asyncio.gather(
        *(store.upsert([f"k{i}"], rows(1, seed=i)) for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, StoreError) and "disk full" in str(r) for r in results)
    assert store.collection_name in str(results[0])
    monkeypatch.setattr(Collection, "upsert", original)
    await store.upsert(["k0"], rows(1))
    assert sorted([i async for i in store.ids()]) == ["k0", "seed"]


async def test_a_failing_call_is_a_store_error_naming_the_operation_and_collection(make_store, monkeypatch):
    """Each read's failure says which operation failed, on which collection
    and where, with Chroma's own error; a write's says "write"."""
    store = await make_store("embedded")
    await store.upsert(["seed"], [[1, 0, 0, 0]])

    def refused(self, *args, **kwargs):
        raise RuntimeError("refused by the test")

    for method in ("get", "count", "query", "upsert"):
        monkeypatch.setattr(Collection, method, refused)
    where = f"on collection {store.collection_name!r} ({store.location}) failed: RuntimeError: refused by the test"
    calls = {
        "count": store.count,
        "ids": lambda: collect(store.ids()),
        "get": lambda: store.get(["seed"]),
        "records": lambda: collect(store.records(10)),
        "query": lambda: store.query([1, 0, 0, 0], 1),
        "write": lambda: store.upsert(["b"], rows(1)),
    }
    for what, call in calls.items():
        with pytest.raises(StoreError) as caught:
            await call()
        assert str(caught.value) == f"{what} {where}", what


# -- the chroma-server script ------------------------------------------------------------


def test_server_script_starts_waits_and_stops(tmp_path, free_port, chroma_script):
    """``start`` returns once the heartbeat answers and prints the URL; a second
    ``start`` on the taken port fails with a clear message; ``stop`` ends it and
    removes the temporary data folder it made."""
    port = str(free_port())
    started = chroma_script("start", "--port", port, state_dir=tmp_path)
    try:
        assert started.returncode == 0, started.stderr
        assert f"RAGKIT_CHROMA_URL=http://127.0.0.1:{port}" in started.stdout
        assert chroma_script("status", "--port", port, state_dir=tmp_path).returncode == 0
        again = chroma_script("start", "--port", port, state_dir=tmp_path)
        assert again.returncode == 1 and "already listens on" in again.stderr
    finally:
        stopped = chroma_script("stop", "--port", port, state_dir=tmp_path)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    down = chroma_script("status", "--port", port, state_dir=tmp_path)
    assert down.returncode == 1 and "no chroma server answers" in down.stderr
    assert not list(tmp_path.glob("*.json"))


def test_server_script_reports_a_server_that_exits(tmp_path, free_port, chroma_script):
    """A server process that exits fails ``start`` at once, with its log."""
    fake = tmp_path / "fake-chroma"
    fake.write_text("#!/bin/sh\necho 'cannot bind: permission denied' >&2\nexit 3\n")
    fake.chmod(0o755)
    done = chroma_script("start", "--port", str(free_port()), state_dir=tmp_path, env={"CHROMA_BIN": str(fake)})
    assert done.returncode == 1
    assert "exited with code 3" in done.stderr and "cannot bind: permission denied" in done.stderr


def test_server_script_times_out_with_a_clear_message(tmp_path, free_port, chroma_script):
    """A server that never answers is stopped after --timeout, with its log."""
    fake = tmp_path / "silent-chroma"
    fake.write_text("#!/bin/sh\necho 'starting...'\nexec sleep 60\n")
    fake.chmod(0o755)
    done = chroma_script("start", "--port", str(free_port()), "--timeout", "1", state_dir=tmp_path,
                         env={"CHROMA_BIN": str(fake)})
    assert done.returncode == 1
    assert "no heartbeat" in done.stderr and "starting..." in done.stderr


# -- failures while writing ------------------------------------------------------------


async def test_a_drop_the_server_cannot_take_is_a_store_error_naming_the_drop(tmp_path, free_port, chroma_script):
    """A server stopped after the store opened: ``drop`` fails with a StoreError
    that says it was the drop that failed, on which collection, and why."""
    port = str(free_port())
    started = chroma_script("start", "--port", port, state_dir=tmp_path)
    assert started.returncode == 0, started.stderr
    store = ChromaVectorStore(config(host="127.0.0.1", port=int(port)))
    try:
        await store.open()
        await store.upsert(["a"], rows(1))
    finally:
        stopped = chroma_script("stop", "--port", port, state_dir=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    where = re.escape(f"'{store.collection_name}' (Chroma at http://127.0.0.1:{port})")
    with pytest.raises(StoreError, match=rf"^drop on collection {where} failed: ConnectError"):
        await store.drop()
    await store.close()


async def test_a_cancelled_group_write_fails_every_write_in_it_and_leaves_no_unretrieved_error(make_store):
    """Writes queued behind another go out as one group, applied by the first
    writer's task. Cancelled while it applies them, that task ends cancelled,
    every other write of the group fails with a StoreError saying it may be
    partly applied, and no future's error is left unread (asyncio would log
    "Future exception was never retrieved"). The store goes on working."""
    import gc

    store = await make_store("embedded")
    seen: list[str] = []  # what asyncio reports: a future's error nobody read, on its collection
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: seen.append(context["message"]))
    busy = asyncio.create_task(store.upsert([f"w{i}" for i in range(3000)], rows(3000)))
    await asyncio.sleep(0)  # busy holds the write lock, in its worker thread
    mine = asyncio.create_task(store.upsert(["a"], rows(1, seed=1)))
    other = asyncio.create_task(store.upsert(["b"], rows(1, seed=2)))
    await asyncio.sleep(0)  # both queued behind busy: one group, applied by mine's task
    await busy
    for _ in range(3):  # mine takes the lock and hands the group to a worker thread
        await asyncio.sleep(0)
    mine.cancel()
    with pytest.raises(asyncio.CancelledError):
        await mine
    with pytest.raises(StoreError, match=r"^a write to collection '[^']+' was interrupted "
                                         r"\(the task applying it was cancelled\); it may be partly applied$"):
        await other
    del busy, mine, other
    gc.collect()
    await asyncio.sleep(0)
    assert not [m for m in seen if "never retrieved" in m], seen
    await store.upsert(["c"], rows(1, seed=3))
    assert "c" in {r.id for r in await store.get(["c"]) if r is not None}


async def test_calls_to_a_stopped_server_fail_once_naming_what_failed(tmp_path, free_port, chroma_script, monkeypatch):
    """A server stopped after the stores opened: a write fails after one request
    (no retry: only a collection another client dropped is looked up again), and
    a store that had not looked its collection up yet says the look-up failed."""
    port = str(free_port())
    started = chroma_script("start", "--port", port, state_dir=tmp_path)
    assert started.returncode == 0, started.stderr
    used = ChromaVectorStore(config(host="127.0.0.1", port=int(port)))
    fresh = ChromaVectorStore(StoreConfig(namespace="other", options={"host": "127.0.0.1", "port": int(port)},
                                          dimension=4))
    try:
        await used.open()
        await used.upsert(["a"], rows(1))
        await fresh.open()  # no collection yet: none looked up
    finally:
        stopped = chroma_script("stop", "--port", port, state_dir=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    calls = CallLog(monkeypatch, "upsert", "get", "delete")
    with pytest.raises(StoreError, match=r"^write on collection .* failed: ConnectError"):
        await used.upsert(["b"], rows(1))
    assert len(calls.calls) == 1, calls.calls
    where = re.escape(f"'{fresh.collection_name}' (Chroma at http://127.0.0.1:{port})")
    with pytest.raises(StoreError, match=rf"^open on collection {where} failed: ConnectError"):
        await fresh.upsert(["b"], rows(1))
    for store in (used, fresh):
        await store.close()


async def test_a_collection_dropped_under_every_write_fails_it_after_one_retry(make_store, monkeypatch):
    """Another client drops the collection just before each request of a write:
    the store looks it up again (making it anew) and tries once more; dropped
    again, the write fails with a StoreError naming Chroma's NotFoundError."""
    store = await make_store("embedded")
    await store.upsert(["a"], rows(1))
    tries: list[str] = []
    original = Collection.get

    def dropped_first(self_, *args, **kwargs):
        tries.append(self_.name)
        store.client.delete_collection(self_.name)  # as another client would
        return original(self_, *args, **kwargs)

    monkeypatch.setattr(Collection, "get", dropped_first)
    with pytest.raises(StoreError, match=r"^write on collection .* failed: NotFoundError"):
        await store.upsert(["b"], rows(1))
    assert tries == [store.collection_name] * 2


async def test_a_collection_made_by_the_store_names_its_workspace_and_namespace(make_store, mode):
    """What another tool listing the server's collections sees: the dimension,
    the embedder, and the ragkit workspace and namespace the collection holds."""
    store = await make_store(mode, workspace="team-a", namespace="entities")
    await store.upsert(["a"], rows(1))
    metadata = store.client.get_collection(store.collection_name, embedding_function=None).metadata
    assert metadata["ragkit_workspace"] == "team-a" and metadata["ragkit_namespace"] == "entities"


# -- what the HTTP client is given ----------------------------------------------------------


@pytest.fixture
def proxy(chroma_url):
    """``proxy(host=...)``: a recording proxy to the test server, on that loopback address."""
    made: list[RecordingProxy] = []

    def start(host: str = "127.0.0.1", port: int = 0) -> RecordingProxy:
        made.append(RecordingProxy(chroma_url, host=host, port=port))
        return made[-1]

    yield start
    for p in made:
        p.close()


async def _round_trip(store: ChromaVectorStore) -> None:
    """Open, write, count, drop and close: a request of each kind."""
    await store.open()
    try:
        await store.upsert(["a"], rows(1))
        assert await store.count() == 1
        await store.drop()
    finally:
        await store.close()


async def test_the_token_and_headers_reach_the_server(proxy):
    """``auth_token`` is sent as ``Authorization: Bearer ...`` and ``headers`` as given,
    on every request, through a proxy that records what arrives."""
    door = proxy()
    await _round_trip(ChromaVectorStore(config(host=door.host, port=door.port, auth_token="tok-123",
                                               headers={"X-Team": "blue"})))
    assert len(door.requests) >= 4
    # Header names are case-insensitive (RFC 9110): compared as such.
    sent = [{k.lower(): v for k, v in headers.items()} for _, _, headers in door.requests]
    assert all(h.get("authorization") == "Bearer tok-123" and h.get("x-team") == "blue" for h in sent), sent


async def test_host_and_port_are_used_and_default_to_localhost_8000(proxy, chroma_url):
    """A server reachable at another loopback address (127.0.0.2) only through
    ``host``; with no ``host``, ``localhost``; with no ``port``, 8000 (at
    127.0.0.3, where no other server is)."""
    elsewhere = proxy(host="127.0.0.2")
    default_port = proxy(host="127.0.0.3", port=8000)
    for options in ({"host": "127.0.0.2", "port": elsewhere.port}, {"port": urlsplit(chroma_url).port},
                    {"host": "127.0.0.3"}):
        await _round_trip(ChromaVectorStore(config(**options)))
    assert elsewhere.requests and default_port.requests  # the first and last stores went through them


async def test_ssl_against_a_plain_http_server_is_a_store_error(chroma_url):
    port = urlsplit(chroma_url).port
    store = ChromaVectorStore(config(host="127.0.0.1", port=port, ssl=True))
    with pytest.raises(StoreError, match=rf"^cannot open Chroma at https://127\.0\.0\.1:{port}: "):
        await store.open()


async def test_tenant_and_database_choose_where_collections_live(chroma_url):
    """Stores of one workspace in two databases of a tenant do not see each other."""
    import chromadb

    target = urlsplit(chroma_url)
    tenant, database = f"t{uuid.uuid4().hex[:8]}", "ragkit-tests"
    admin = chromadb.AdminClient(chromadb.config.Settings(
        chroma_api_impl="chromadb.api.fastapi.FastAPI", chroma_server_host=target.hostname,
        chroma_server_http_port=target.port, anonymized_telemetry=False))
    admin.create_tenant(tenant)
    admin.create_database(database, tenant=tenant)
    admin.create_database("other", tenant=tenant)
    base = {"host": target.hostname, "port": target.port, "tenant": tenant}
    mine = ChromaVectorStore(config(**base, database=database))
    other = ChromaVectorStore(config(**base, database="other"))
    for store in (mine, other):
        await store.open()
    try:
        await mine.upsert(["a"], rows(1))
        assert (await mine.count(), await other.count()) == (1, 0)
        client = chromadb.HttpClient(host=target.hostname, port=target.port, tenant=tenant, database=database)
        assert client.get_collection(mine.collection_name, embedding_function=None).count() == 1
        await mine.drop()
    finally:
        for store in (mine, other):
            await store.close()


async def test_the_embedded_database_lives_at_path_its_folders_made(tmp_path):
    """``path`` (relative: under ``working_dir``) is where Chroma's files go,
    its missing parent folders made; nothing is written to the working directory."""
    store = ChromaVectorStore(StoreConfig(namespace="chunks", working_dir=tmp_path, dimension=4,
                                          options={"mode": "embedded", "path": "deep/er/chroma"}))
    await store.open()
    try:
        await store.upsert(["a"], rows(1))
    finally:
        await store.close()
    assert store.path == tmp_path / "deep" / "er" / "chroma"
    assert (store.path / "chroma.sqlite3").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]


@pytest.mark.parametrize("option", ["tenant", "database"])
async def test_an_embedded_tenant_or_database_that_does_not_exist_is_a_store_error(tmp_path, option):
    store = ChromaVectorStore(StoreConfig(namespace="chunks", working_dir=tmp_path, dimension=4,
                                          options={"mode": "embedded", option: "no-such-place"}))
    with pytest.raises(StoreError, match=rf"^cannot open Chroma at .*: NotFoundError: {option.title()} \[no-such-place\]"):
        await store.open()


async def test_an_embedded_path_that_is_a_file_is_a_store_error_saying_to_check_the_folder(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    store = ChromaVectorStore(StoreConfig(namespace="chunks", working_dir=tmp_path, dimension=4,
                                          options={"mode": "embedded", "path": str(taken)}))
    with pytest.raises(StoreError, match=rf"^cannot open Chroma at {re.escape(str(taken))}: FileExistsError: .*; "
                                         "check that the folder is writable and not used by another Chroma version$"):
        await store.open()
    assert taken.read_text() == "not a folder"


async def test_the_client_is_there_only_while_the_store_is_open(make_store, mode):
    """``client`` is ``None`` before ``open()`` and after ``close()``, as its docstring says."""
    store = await make_store(mode, open=False)
    assert store.client is None
    await store.open()
    assert store.client is not None
    await store.close()
    assert store.client is None


async def test_a_write_whose_lease_was_taken_after_its_check_never_reaches_chroma(make_store):
    """The writer lock's check passed, then the process stalled (a blocked event
    loop) past its lease while another writer took the lease. Chroma's requests
    leave from a worker thread, so the store asks the write's permit just before
    each one; renewing fails here, so the write is refused with
    ``WriterLeaseLostError`` and nothing reaches the collection.

    Troubleshoot: with the permit ignored, ``count()`` is 1."""
    import threading
    import time

    from ragkit.core.lock import LockSettings, WriterLock
    from ragkit.errors import WriterLeaseLostError
    from ragkit.protocols.lease import Holder
    from ragkit.testing.contracts.lease.broken import MemoryLease

    table: dict = {}  # the lease's "server", shared with the other writer
    store = await make_store("embedded")
    lock = WriterLock(MemoryLease(table), LockSettings(lease_ttl=1))

    class StallAfterCheck:
        """Passes the lock's check, then blocks the loop past the lease while another writer takes it."""

        lost = property(lambda self: lock.lost)

        async def check(self) -> None:
            await lock.check()
            time.sleep(1.5)  # no heartbeat meanwhile: the lease expires
            taker = threading.Thread(target=lambda: asyncio.run(MemoryLease(table).acquire(Holder(), 60)))
            taker.start()
            taker.join()

        def permit(self):
            return lock.permit()

    raised: list[BaseException] = []
    store.fence = StallAfterCheck()
    try:
        async with lock.hold("index"):
            try:
                await store.upsert(["late"], rows(1))
            except Exception as exc:
                raised.append(exc)
                raise
    except WriterLeaseLostError:
        pass  # the hold ends lost, too
    finally:
        store.fence = None
    assert [type(e) for e in raised] == [WriterLeaseLostError], raised
    assert await store.count() == 0
