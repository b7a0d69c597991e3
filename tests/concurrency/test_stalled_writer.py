"""A writer that stalls while it holds the lock never overlaps the next one.

Process A indexes a folder with an LLM that, after a few answers, blocks at a
gate: it is then mid-indexing, holding the workspace's writer lock, with
batches committed and documents ``processing``. The test stops it
(``SIGSTOP``) for longer than its ``lock.lease_ttl``, then starts B, another
indexer:

- server leases (``servers``: the Redis lease of the doc-status store;
  ``neo4j-graph``: embedded stores with the lease in the Neo4j graph store) expire:
  B takes the lease, recovers A's unfinished documents and indexes its own.
  Then A is continued (``SIGCONT``) and its gate opened: its next write is
  refused (``WriterLeaseLostError``) and it writes nothing more, so every
  store holds what B left, and ``ragkit check`` is clean;
- the file lock (``embedded``) cannot be lost by stalling: B waits all along
  and nothing changes while A is stopped; continued, A finishes its run and B
  runs after it.

And a lock file removed while A holds it (the one way to lose a file lock):
the next writer locks a new file, and A, continued, writes nothing more.

On the code before fencing, ``servers`` fails (A goes on writing over B's
work after it wakes up) and so does ``neo4j-graph`` (no lease: B waits for
the file lock of the embedded doc-status store, and A's stall blocks it), as
does the removed lock file (A goes on writing).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from ragkit.testing.snapshot import store_snapshot

from .conftest import WAITING, Workspace, write_corpus
from .test_writers_and_readers import SMALL_BATCHES, assert_clean, doc_ids

STALLING_WRITER = """
import asyncio, sys
from pathlib import Path
from ragkit.offline import OfflineLLM
from ragkit.rag import RAG

folder, stalled, gate, free = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])

class GatedLLM(OfflineLLM):
    calls = 0

    async def complete(self, request):
        GatedLLM.calls += 1
        if GatedLLM.calls > free:
            stalled.touch()  # the test stops this process while it waits here
            while not gate.exists():
                await asyncio.sleep(0.05)
        return await super().complete(request)

async def main():
    async with RAG(llm=GatedLLM()) as rag:
        _, report = await rag.ainsert(paths=[str(folder)])
    print("indexed", len(report.processed))

asyncio.run(main())
"""
"""Indexes a folder; after ``free`` LLM answers each call waits for the gate file."""

STALLED_TTL = 3
"""A's ``lock.lease_ttl``: short, so that the test stops it only a few seconds;
B keeps the default (a short one could expire under a loaded machine)."""
FREE_ANSWERS = 3


def everything(ws: Workspace) -> dict:
    """What every store holds (ids, graph properties, statuses), caches included."""

    async def read(rag):
        snap = await store_snapshot(rag.stores)
        snap["llm_cache"] = sorted([k async for k in rag.stores.llm_cache.keys()])
        snap["doc_paths"] = sorted([k async for k in rag.stores.doc_paths.keys()])
        return snap

    return ws.api(read)


def holder_pid(ws: Workspace) -> int | None:
    async def read(rag):
        found = await rag.stores.lock.lease.holder()
        return found.pid if found else None

    return ws.api(read)


def start_stalling_writer(ws: Workspace, folder: Path) -> tuple:
    stalled, gate = ws.root / "a-stalled", ws.root / "a-gate"
    proc = ws.start(
        str(folder), str(stalled), str(gate), str(FREE_ANSWERS), python=STALLING_WRITER,
        RAGKIT_LOCK__LEASE_TTL=str(STALLED_TTL), **SMALL_BATCHES,
    )
    deadline = time.monotonic() + 120
    while not stalled.exists():
        assert proc.poll() is None, f"the stalling writer ended early:\n{ws.wait(proc).err}"
        assert time.monotonic() < deadline, "the stalling writer never reached its gate"
        time.sleep(0.05)
    return proc, gate


def wait_until_waiting(proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while WAITING not in proc.files[1].read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, "the second writer never said it was waiting"
        time.sleep(0.05)


@pytest.mark.parametrize("workspace", ["servers", "neo4j-graph"], indirect=True)
def test_a_stalled_holder_that_lost_its_lease_writes_nothing_after(workspace):
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 6)
    b = write_corpus(ws.root / "b", "beta", 4)
    first, gate = start_stalling_writer(ws, ws.root / "a")
    assert holder_pid(ws) == first.pid
    os.kill(first.pid, signal.SIGSTOP)  # stalled, holding the lease
    try:
        time.sleep(STALLED_TTL * 1.5)
        assert holder_pid(ws) is None, "the stopped holder's lease did not expire"
        second = ws.run("index", str(ws.root / "b"), "--json", RAGKIT_LOCK__TIMEOUT="60", **SMALL_BATCHES).ok()
        assert WAITING not in second.err
        assert json.loads(second.out)["recovered"], "the second writer recovered none of the stalled one's documents"
        before = everything(ws)
        gate.touch()
    finally:
        os.kill(first.pid, signal.SIGCONT)
    stalled = ws.wait(first)
    assert stalled.code != 0 and "WriterLeaseLostError" in stalled.err, (stalled.code, stalled.out, stalled.err[-3000:])
    assert "indexed" not in stalled.out
    assert everything(ws) == before, "the stalled writer wrote after it lost its lease"
    assert_clean(ws, set(doc_ids(ws, a + b)))


@pytest.mark.parametrize("workspace", ["embedded"], indirect=True)
def test_a_stalled_holder_of_the_file_lock_keeps_it_and_nobody_overlaps(workspace):
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 6)
    b = write_corpus(ws.root / "b", "beta", 4)
    first, gate = start_stalling_writer(ws, ws.root / "a")
    os.kill(first.pid, signal.SIGSTOP)
    try:
        before = everything(ws)
        second = ws.start("index", str(ws.root / "b"), "--json", **SMALL_BATCHES)
        wait_until_waiting(second)
        time.sleep(STALLED_TTL * 1.5)  # past A's lease_ttl: a server lease would have expired by now
        assert second.poll() is None, f"the second writer did not wait:\n{ws.wait(second).err}"
        assert holder_pid(ws) == first.pid, "the stopped holder lost the file lock"
        assert everything(ws) == before, "something was written while the holder was stopped"
        gate.touch()
    finally:
        os.kill(first.pid, signal.SIGCONT)
    stalled = ws.wait(first).ok()
    assert "indexed 6" in stalled.out  # it never lost the lock: its whole run counts
    after = ws.wait(second).ok()
    assert "got the writer lock" in after.err and json.loads(after.out)["processed"] == len(b)
    assert_clean(ws, set(doc_ids(ws, a + b)))


@pytest.mark.parametrize("workspace", ["embedded"], indirect=True)
def test_a_holder_whose_lock_file_was_removed_writes_nothing_after(workspace):
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 6)
    b = write_corpus(ws.root / "b", "beta", 4)
    first, gate = start_stalling_writer(ws, ws.root / "a")
    lock_file = next(Path(ws.env["RAGKIT_WORKING_DIR"]).glob("*/.writer.lock"))
    lock_file.unlink()  # a cleanup removes it while A holds the lock on it
    second = ws.run("index", str(ws.root / "b"), "--json", **SMALL_BATCHES).ok()
    assert WAITING not in second.err  # a new file, a new lock: nothing kept it out
    before = everything(ws)
    gate.touch()
    stalled = ws.wait(first)
    assert stalled.code != 0 and "WriterLeaseLostError" in stalled.err, (stalled.code, stalled.out, stalled.err[-3000:])
    assert everything(ws) == before, "the writer whose lock file was removed went on writing"
    assert_clean(ws, set(doc_ids(ws, a + b)))



# -- a store request already past its fence check ---------------------------------------
#
# The fence is asked before each write; what is left is a holder that stalls
# *after* that check and before its request reaches the server, for longer than
# its lease: the next writer takes over and writes, and then the request goes
# out. Each server store must refuse it (Redis and Neo4j check the lease in the
# write's own transaction or statement) or not send it (the lease's validity
# deadline, checked immediately before the request leaves). Reproduced in one
# process: the stalled holder's fence passes its check, then blocks the event
# loop (no heartbeat runs) while a thread, standing for another process with
# its own loop, connections, lease and store, waits for the lease to expire,
# takes it and writes the same key.

STALL_TTL = 1.0


def _server_store(spec: str, tmp_path: Path, workspace: str):
    from ragkit.plugins import create_store, get_registry
    from ragkit.protocols.base import StoreConfig
    from ragkit.testing.contracts.options import contract_options

    from .conftest import REQUIRED

    kind, name = spec.split(":")
    try:
        options = contract_options(kind, name, tmp_path)
    except pytest.skip.Exception as exc:
        if "servers" in REQUIRED:
            pytest.fail(f"{spec} is required but unreachable: {exc.msg}")
        raise
    config = StoreConfig(namespace=kind, workspace=workspace, working_dir=tmp_path, options=options,
                         dimension=4 if kind == "vector" else None)
    return create_store(kind, get_registry().get(kind, name), config)


async def _write(store, who: int) -> None:
    """One write of ``who``'s value under the key ``k``, whatever the store kind."""
    import numpy as np

    from ragkit.schema import DocStatusRecord

    kind = type(store).__mro__
    names = {c.__name__ for c in kind}
    if "KVStore" in names:
        await store.upsert({"k": {"v": who}})
    elif "DocStatusStore" in names:
        await store.upsert([DocStatusRecord(id="k", content_length=who)])
    elif "GraphStore" in names:
        await store.upsert_node("k", {"v": who})
    else:
        await store.upsert(["k"], np.array([[1.0, who, 0.0, 0.0]]), [{"v": who}])


async def _read(store) -> int | None:
    names = {c.__name__ for c in type(store).__mro__}
    if "KVStore" in names:
        found = await store.get("k")
        return None if found is None else found["v"]
    if "DocStatusStore" in names:
        (found,) = await store.get(["k"])
        return None if found is None else found.content_length
    if "GraphStore" in names:
        found = await store.get_node("k")
        return None if found is None else found["v"]
    (found,) = await store.get(["k"])
    return None if found is None else found.metadata["v"]


class StallAfterCheck:
    """A fence that passes the writer lock's check, then once runs ``stall``
    (which blocks the event loop) before handing the write back to the store."""

    def __init__(self, lock, stall) -> None:
        self.lock, self.stall = lock, stall

    @property
    def lost(self) -> bool:
        return self.lock.lost

    async def check(self):
        passed = await self.lock.check()
        stall, self.stall = self.stall, None
        if stall is not None:
            stall()
        return passed

    def __getattr__(self, name: str):
        return getattr(self.lock, name)


def stall_while(take_over, took_over: list):
    """A stall for ``StallAfterCheck``: blocks the event loop past the lease,
    then runs ``take_over()`` (another process: a thread with its own loop)
    to its end; appends ``None`` or its error to ``took_over``."""
    import asyncio
    import threading

    def stall() -> None:
        time.sleep(STALL_TTL * 1.5)  # a blocked event loop: no heartbeat; the lease expires

        def run() -> None:
            try:
                asyncio.run(take_over())
                took_over.append(None)
            except BaseException as exc:  # reported by the test's assertion
                took_over.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(60)

    return stall


# (store written, store holding the lease): the servers combination's (Redis
# doc-status lease) and the Neo4j-graph one's (the lease in the graph store).
STALL_CASES = [
    ("kv:redis", "doc_status:redis"),
    ("doc_status:redis", "doc_status:redis"),
    ("graph:neo4j", "doc_status:redis"),
    ("vector:chroma-http", "doc_status:redis"),
    ("graph:neo4j", "graph:neo4j"),
    # Redis stores under a lease Redis cannot WATCH: the permit's deadline is
    # checked just before the request leaves instead (``RedisStore.commit``).
    ("kv:redis", "graph:neo4j"),
    ("doc_status:redis", "graph:neo4j"),
]


@pytest.mark.parametrize(("written", "leased"), STALL_CASES, ids=[f"{w}-under-{l}" for w, l in STALL_CASES])
async def test_a_write_past_its_fence_check_when_the_holder_stalls_is_refused(tmp_path, written, leased):
    """On the code before this check, the stalled holder's write lands after the
    other writer's (the store then holds 1, not 2). Troubleshooting: a failure
    names what the store holds; 1 means the late request reached the server."""
    import uuid

    from ragkit.core.lock import LockSettings, WriterLock
    from ragkit.errors import WriterLeaseLostError

    workspace = f"s{uuid.uuid4().hex[:8]}"
    mine = _server_store(written, tmp_path, workspace)
    lease_store = mine if written == leased else _server_store(leased, tmp_path, workspace)
    for store in {id(mine): mine, id(lease_store): lease_store}.values():
        await store.open()
    lock = WriterLock(lease_store.writer_lease(), LockSettings(lease_ttl=STALL_TTL))
    took_over: list[BaseException | None] = []

    async def take_over() -> None:  # another process: its own loop, connections, lease and store
        other = _server_store(written, tmp_path, workspace)
        other_lease = other if written == leased else _server_store(leased, tmp_path, workspace)
        for store in {id(other): other, id(other_lease): other_lease}.values():
            await store.open()
        try:
            taker = WriterLock(other_lease.writer_lease(), LockSettings(timeout=10))
            other.fence = taker
            async with taker.hold("index"):
                await _write(other, 2)
        finally:
            for store in {id(other): other, id(other_lease): other_lease}.values():
                store.fence = None
                await store.close()

    mine.fence = StallAfterCheck(lock, stall_while(take_over, took_over))
    try:
        with pytest.raises(WriterLeaseLostError):
            async with lock.hold("index"):
                await _write(mine, 1)
        assert took_over == [None], f"the other writer failed: {took_over}"
        assert lock.lost
        mine.fence = None
        assert await _read(mine) == 2, "the stalled holder's request reached the server after the other writer's"
    finally:
        mine.fence = None
        if mine.is_open:
            await mine.drop()
        for store in {id(mine): mine, id(lease_store): lease_store}.values():
            if store.is_open:
                await store.close()


@pytest.mark.parametrize("leased", ["doc_status:redis", "graph:neo4j"])
async def test_a_doc_status_transition_past_its_fence_check_is_refused(tmp_path, leased):
    """The doc-status ``transition`` (a check-and-set of its own) under the
    same stall, under its own store's Redis lease (the WATCHed fencing
    counter) and under the Neo4j graph's (the permit's deadline): refused,
    and the other writer's record stays, though the lifecycle would allow the
    late transition from it."""
    import uuid

    from ragkit.core.lock import LockSettings, WriterLock
    from ragkit.errors import WriterLeaseLostError
    from ragkit.schema import DocStatus, DocStatusRecord

    workspace = f"s{uuid.uuid4().hex[:8]}"
    mine = _server_store("doc_status:redis", tmp_path, workspace)
    lease_store = mine if leased == "doc_status:redis" else _server_store(leased, tmp_path, workspace)
    for store in {id(mine): mine, id(lease_store): lease_store}.values():
        await store.open()
    await mine.upsert([DocStatusRecord(id="k", status=DocStatus.PENDING)])
    lock = WriterLock(lease_store.writer_lease(), LockSettings(lease_ttl=STALL_TTL))
    took_over: list[BaseException | None] = []

    async def take_over() -> None:
        other = _server_store("doc_status:redis", tmp_path, workspace)
        other_lease = other if leased == "doc_status:redis" else _server_store(leased, tmp_path, workspace)
        for store in {id(other): other, id(other_lease): other_lease}.values():
            await store.open()
        try:
            taker = WriterLock(other_lease.writer_lease(), LockSettings(timeout=10))
            other.fence = taker
            async with taker.hold("index"):  # a record the late transition could still move on
                await other.upsert([DocStatusRecord(id="k", status=DocStatus.PENDING, content_length=2)])
        finally:
            other.fence = None
            for store in {id(other): other, id(other_lease): other_lease}.values():
                await store.close()

    mine.fence = StallAfterCheck(lock, stall_while(take_over, took_over))
    try:
        with pytest.raises(WriterLeaseLostError):
            async with lock.hold("index"):
                await mine.transition("k", DocStatus.PROCESSING)
        assert took_over == [None], f"the other writer failed: {took_over}"
        mine.fence = None
        (record,) = await mine.get(["k"])
        assert (record.status, record.content_length) == (DocStatus.PENDING, 2), "the late transition landed"
    finally:
        mine.fence = None
        await mine.drop()
        for store in {id(mine): mine, id(lease_store): lease_store}.values():
            await store.close()


async def test_each_redis_lease_acquisition_gets_a_larger_fencing_token(tmp_path):
    """The token that Redis writes compare (``Holder.fence``) grows with every
    acquisition, a release and an expiry included, and is never stored in the
    lease's value (which renewals compare)."""
    import uuid

    from ragkit.protocols.lease import Holder

    store = _server_store("doc_status:redis", tmp_path, f"s{uuid.uuid4().hex[:8]}")
    await store.open()
    lease = store.writer_lease()
    try:
        tokens = []
        for ttl in (30, 0.2, 30):
            holder = Holder()
            assert await lease.acquire(holder, ttl)
            assert await lease.acquire(Holder(), ttl) is False
            tokens.append(holder.fence)
            assert (await lease.holder()).fence == 0  # not part of the stored value
            if ttl == 30:
                await lease.release(holder)
            else:
                time.sleep(0.4)  # expired, not released
        assert tokens[0] > 0 and tokens == sorted(set(tokens)), tokens
    finally:
        await store.client.delete(lease.key, lease.fence_key)
        await store.drop()
        await store.close()
