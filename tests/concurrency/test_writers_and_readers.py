"""Issue 15, item 1: two processes on one workspace lose nothing.

Each test starts real processes at once (index + index, index + delete,
index + a loop of queries, graph edits + index) on the embedded stores and on
the server combination, then checks the workspace: ``ragkit check`` is clean,
nothing deleted comes back, every accepted document is processed, no process
crashed, and the second writer said it was waiting.

Without the writer lock these reproduce the issue's data loss (a snapshot
rewritten by whichever process closed last, a journal deleted under a writer,
``FileNotFoundError`` on ``entities.npz.journal``).
"""

from __future__ import annotations

import json
import time

import pytest

from ragkit.pipeline.documents import resolve_documents
from ragkit.schema import DocStatus

from .conftest import WAITING, Run, Workspace, write_corpus

SMALL_BATCHES = {"RAGKIT_INDEX__MAX_BATCH_DOCS": "2"}


def statuses(ws: Workspace) -> dict[str, str]:
    async def read(rag):
        out, cursor = {}, None
        while True:
            page = await rag.stores.doc_status.list_page(None, 500, cursor)
            out.update({r.id: r.status.value for r in page.items})
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    return ws.api(read)


def doc_ids(ws: Workspace, paths) -> list[str]:
    async def resolve(rag):
        return (await resolve_documents(rag.stores, [str(p) for p in paths])).require_all()

    return ws.api(resolve)


def assert_clean(ws: Workspace, expected_docs: set[str]) -> None:
    """``ragkit check`` finds nothing, and exactly the expected documents are there, all processed."""
    check = ws.run("check", "--json").ok()
    report = json.loads(check.out)
    assert report["ok"] and report["problems"] == [], report["problems"][:5]
    found = statuses(ws)
    assert set(found) == expected_docs, (sorted(set(found) - expected_docs), sorted(expected_docs - set(found)))
    assert set(found.values()) == {DocStatus.PROCESSED.value}, found


def assert_waited(*runs: Run) -> None:
    assert any(WAITING in r.err for r in runs), [r.err for r in runs]


def test_two_indexers_on_different_folders(workspace):
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 6)
    b = write_corpus(ws.root / "b", "beta", 6)
    first = ws.holding_writer(ws.root / "a", **SMALL_BATCHES)
    second = ws.start("index", str(ws.root / "b"), "--json", **SMALL_BATCHES)
    ws.overlap(first, second)
    runs = [ws.wait(first).ok(), ws.wait(second).ok()]
    assert f"waiting for the writer index (pid {first.pid} on " in runs[1].err
    assert_clean(ws, set(doc_ids(ws, a + b)))
    # The second run indexed its own folder and did not redo the first one's.
    assert json.loads(runs[1].out)["processed"] == len(b)


@pytest.mark.parametrize("workspace", ["embedded"], indirect=True)
def test_two_cli_indexers_started_together(workspace):
    """The issue's own reproduction: both CLI runs at once, small batches, on
    the files, where it crashed (the servers take the lock path above)."""
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 8)
    b = write_corpus(ws.root / "b", "beta", 8)
    procs = [ws.start("index", str(ws.root / d), **SMALL_BATCHES) for d in ("a", "b")]
    for proc in procs:
        ws.wait(proc).ok()
    assert_clean(ws, set(doc_ids(ws, a + b)))


def test_index_while_deleting_a_document(workspace):
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 6)
    b = write_corpus(ws.root / "b", "beta", 6)
    ws.run("index", str(ws.root / "a")).ok()
    gone_id, = doc_ids(ws, [a[2]])

    async def chunks_of(rag):
        return [k async for k in rag.stores.chunks.keys() if (await rag.stores.chunks.get(k))["doc_id"] == gone_id]

    gone_chunks = set(ws.api(chunks_of))
    assert gone_chunks

    async def context(rag):
        return (await rag.aquery("Who leads Project Alpha2?", mode="local", only_need_context=True)).context

    assert "project alpha2" in ws.api(context).lower()  # so its absence afterwards means something
    indexer = ws.holding_writer(ws.root / "b", **SMALL_BATCHES)
    deleter = ws.start("delete", str(a[2]))
    ws.overlap(indexer, deleter)
    ws.wait(indexer).ok()
    assert_waited(ws.wait(deleter).ok())
    assert_clean(ws, set(doc_ids(ws, [*a[:2], *a[3:], *b])))
    assert_nothing_quotes(ws, gone_id, gone_chunks, "Project Alpha2")


def assert_nothing_quotes(ws: Workspace, doc_id: str, chunk_ids: set[str], own_entity: str) -> None:
    """No status, chunk, vector, entity or relation of the deleted document is
    left, and no query mode answers from it."""

    async def leftovers(rag):
        s = rag.stores
        found = []
        found += [c for c in chunk_ids if await s.chunks.get(c) is not None]
        found += [v async for v in s.chunk_vectors.ids() if v in chunk_ids]
        async for node in s.graph.nodes():
            text = json.dumps([node.id, node.properties])
            found += [f"node {node.id}"] * (own_entity.lower() in text.lower() or any(c in text for c in chunk_ids))
        async for edge in s.graph.edges():
            text = json.dumps([edge.key, edge.properties])
            found += [f"edge {edge.key}"] * (own_entity.lower() in text.lower() or any(c in text for c in chunk_ids))
        found += [doc_id] * ((await s.doc_status.get([doc_id]))[0] is not None)
        return found

    assert ws.api(leftovers) == []

    async def contexts(rag):
        out = {}
        for mode in ("local", "global", "hybrid", "mix", "naive"):
            result = await rag.aquery(f"Who leads {own_entity}?", mode=mode, only_need_context=True)
            out[mode] = (result.context, {c["id"] for c in result.chunks})
        return out

    for mode, (context, chunks) in ws.api(contexts).items():
        assert own_entity.lower() not in context.lower() and not chunks & chunk_ids, mode


def test_index_while_queries_run_in_a_loop(workspace):
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 6)
    c = write_corpus(ws.root / "c", "gamma", 10)
    ws.run("index", str(ws.root / "a")).ok()
    indexer = ws.start("index", str(ws.root / "c"), **SMALL_BATCHES)
    ws.wait_for_writer(indexer)
    queries: list[Run] = []
    while indexer.poll() is None or not queries:
        queries.append(ws.run("query", "Who audited Bluepeak Metals?", "--context-only"))
    indexing = ws.wait(indexer).ok()
    for q in queries:
        q.ok()
        assert WAITING not in q.err  # readers never wait for the writer
    assert WAITING not in indexing.err
    assert_clean(ws, set(doc_ids(ws, a + c)))
    # Afterwards every document is visible to a query process.
    final = json.loads(ws.run("query", "Who leads Project Gamma9?", "--mode", "local", "--context-only", "--json").ok().out)
    assert "project gamma9" in final["context"].lower()


EDITS = """
from ragkit.rag import RAG
with RAG() as rag:
    for i in range(4):
        rag.create_entity(f"Edited Harbor {i}", "place", f"A harbor added by hand, number {i}.")
    rag.create_relation("Edited Harbor 0", "Edited Harbor 1", "ferry", "A ferry links the two harbors.")
    rag.edit_entity("Edited Harbor 2", description="The harbor renamed by an edit.")
    rag.delete_entity("Edited Harbor 3")
    rag.insert_custom_kg({
        "chunks": [{"content": "Custom Lighthouse stands on the cape."}],
        "entities": [{"name": "Custom Lighthouse", "type": "place", "description": "A custom entity."}],
    })
print("edits done")
"""


def test_graph_edits_while_indexing(workspace):
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 6)
    b = write_corpus(ws.root / "b", "beta", 6)
    ws.run("index", str(ws.root / "a")).ok()
    indexer = ws.holding_writer(ws.root / "b", **SMALL_BATCHES)
    editor = ws.start(python=EDITS)
    ws.overlap(indexer, editor)
    edits, indexing = ws.wait(editor).ok(), ws.wait(indexer).ok()
    assert "edits done" in edits.out
    assert_waited(edits)
    assert WAITING not in indexing.err

    async def graph(rag):
        nodes = {n.id: n.properties async for n in rag.stores.graph.nodes()}
        edges = {e.key async for e in rag.stores.graph.edges()}
        return nodes, edges

    nodes, edges = ws.api(graph)
    names = {k.lower(): v for k, v in nodes.items()}
    assert "edited harbor 0" in names and "edited harbor 1" in names and "custom lighthouse" in names
    assert "edited harbor 3" not in names
    assert names["edited harbor 2"]["description"] == "The harbor renamed by an edit."
    assert any({k.lower() for k in key} == {"edited harbor 0", "edited harbor 1"} for key in edges)
    assert "project beta5" in names and "project alpha5" in names  # the indexer's work is all there
    # insert_custom_kg adds a document of its own: it counts as accepted too.
    expected = set(doc_ids(ws, a + b))
    found = statuses(ws)
    assert expected <= set(found) and set(found.values()) == {DocStatus.PROCESSED.value}
    assert_clean(ws, set(found))


HOLD = """
import asyncio, sys
from ragkit.rag import RAG
async def main():
    async with RAG() as rag:
        async with rag.stores.writing("test hold"):
            print("held", flush=True)
            await asyncio.sleep(float(sys.argv[1]))
asyncio.run(main())
"""


def test_a_second_writer_times_out_naming_the_holder_until_the_holder_dies(workspace):
    """Timeout 0 fails at once, timeout 1 waits then fails (exit 3, naming the
    holder); after kill -9 of the holder the next writer proceeds: the OS drops
    a file lock at once, a server lease expires after its ttl (1 s here)."""
    ws = workspace
    a = write_corpus(ws.root / "a", "alpha", 3)
    holder = ws.start(python=HOLD.replace("sys.argv[1]", "60"), RAGKIT_LOCK__LEASE_TTL="1")
    held = ws.wait_for_writer(holder)
    assert held["what"] == "test hold"
    at_once = ws.run("index", str(ws.root / "a"), RAGKIT_LOCK__TIMEOUT="0")
    assert at_once.code == 3 and "Traceback" not in at_once.err
    assert f"pid {holder.pid}" in at_once.err and "RAGKIT_LOCK__TIMEOUT" in at_once.err
    started = time.monotonic()
    later = ws.run("check", "--repair", RAGKIT_LOCK__TIMEOUT="1")
    assert later.code == 3 and time.monotonic() - started >= 1
    assert WAITING in later.err and f"pid {holder.pid}" in later.err
    assert statuses(ws) == {}  # neither touched the workspace
    holder.kill()
    holder.wait()
    ws.run("index", str(ws.root / "a"), RAGKIT_LOCK__TIMEOUT="20").ok()
    assert_clean(ws, set(doc_ids(ws, a)))
