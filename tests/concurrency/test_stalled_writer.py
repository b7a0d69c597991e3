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

