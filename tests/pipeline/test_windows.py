"""Large documents: segment-wise chunking and window-by-window indexing
(``ragkit.pipeline.windows``).

The windowed path must give what one commit of the whole document gives (the
merge is a pure function of the fragments), report progress while one
document runs, and survive ``kill -9`` between or inside windows: the re-run
ends with a clean ``ragkit check``, the same stores as an uninterrupted run,
and extracts only the chunks after the last committed window.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.backends import build_stores
from ragkit.pipeline.check import check
from ragkit.pipeline.chunk import TokenChunker
from ragkit.pipeline.windows import COMMITTED_MARK, iter_chunks, segments
from ragkit.schema import DocStatus, Document, Segment
from ragkit.settings import Settings
from ragkit.testing.snapshot import store_snapshot
from ragkit.tokenizer import TiktokenTokenizer

sys.path.insert(0, str(Path(__file__).parent))
import window_worker  # noqa: E402

WORKER = Path(__file__).with_name("window_worker.py")
REPO = Path(__file__).resolve().parents[2]


# --- chunking in segments ----------------------------------------------------------


def test_segments_cover_the_text_and_cut_at_breaks():
    text = "".join(f"Paragraph {i} says something.\nSecond line {i}.\n\n" for i in range(300))
    parts = list(segments(text, 1000))
    assert parts[0][0] == 0 and parts[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert all(0 < e - s <= 1000 for s, e in parts)
    assert all(text[s:e].endswith("\n\n") for s, e in parts[:-1])  # paragraph breaks were there
    # No break at all: hard cuts at the size.
    assert list(segments("x" * 2500, 1000)) == [(0, 1000), (1000, 2000), (2000, 2500)]


def test_large_texts_keep_their_locations():
    """Above the threshold a plain text's chunks still say where they lie
    (character spans into the whole text), and a loaded file is chunked along
    its own pages, so its chunks keep their page numbers."""
    chunker = TokenChunker(TiktokenTokenizer(), 64, 8)
    text = "\n\n".join(f"Paragraph {i} tells of harbour {i} and its keeper." for i in range(300))
    for chunk in iter_chunks(chunker, Document(id="d", content=text), segment_chars=2000):
        loc = chunk.location
        assert loc is not None and text[loc.char_start:loc.char_end] == chunk.content
    pages = [f"Page {p} text about lighthouse {p}. " * 20 for p in range(1, 41)]
    starts = [sum(len(x) for x in pages[:i]) for i in range(len(pages))]
    segs = [Segment(start=a, end=a + len(t), page=i + 1) for i, (a, t) in enumerate(zip(starts, pages))]
    doc = Document(id="p", content="".join(pages), segments=segs)
    chunks = list(iter_chunks(chunker, doc, segment_chars=2000))
    assert len(doc.content) > 2000 and all(c.location and c.location.page_start for c in chunks)
    assert chunks[-1].location.page_end == 40


def test_iter_chunks_is_plain_chunking_below_the_threshold_and_valid_above():
    chunker = TokenChunker(TiktokenTokenizer(), 64, 8)
    doc = Document.from_text(window_worker.documents()[0].content)
    assert list(iter_chunks(chunker, doc, len(doc.content))) == chunker.chunk(doc)
    streamed = list(iter_chunks(chunker, doc, 700))
    again = list(iter_chunks(chunker, doc, 700))
    assert streamed == again  # deterministic: the same ids every time
    assert [c.order for c in streamed] == list(range(len(streamed)))
    assert len({c.id for c in streamed}) == len(streamed)
    assert all(c.content in doc.content and c.doc_id == doc.id and c.tokens <= 64 for c in streamed)
    # Every character is in some chunk (whitespace-only pieces aside).
    covered = "".join(c.content for c in streamed)
    assert set(doc.content.split()) <= set(covered.split())


# --- windowed equals one commit ------------------------------------------------------


async def _index(workdir: Path, window: int) -> tuple[dict, list, dict]:
    events: list[tuple[str, int]] = []
    rag = window_worker.make_rag(workdir, window, lambda e, n: events.append((e, n)))
    async with rag:
        report = await rag.indexer().insert(window_worker.documents())
        assert not report.failed and len(report.processed) == 2
        snap = await store_snapshot(rag.stores)
        records = await rag.stores.doc_status.get(sorted(snap["doc_status"]))
        statuses = {r.id: (r.status, r.chunk_ids, r.metadata) for r in records if r}
        assert (await check(rag.stores)).problems == []
    return snap, events, {"statuses": statuses, "chunks": report.chunks}


async def test_windowed_document_gives_the_same_stores_as_one_commit(tmp_path):
    whole, whole_events, whole_info = await _index(tmp_path / "whole", 10_000)
    windowed, events, info = await _index(tmp_path / "windowed", 4)
    assert windowed == whole
    assert info == whole_info  # same chunk ids per document, processed, no mark left behind
    assert all(s == DocStatus.PROCESSED and COMMITTED_MARK not in m for s, _, m in info["statuses"].values())
    big = max(len(ids) for _, ids, _ in info["statuses"].values())
    assert big > 12  # several windows of 4
    # Progress during the one large document: its plan, then a commit per window,
    # all before the document is counted (once).
    assert ("chunks_planned", big) in events and ("chunks_planned", big) not in whole_events
    assert [e for e in events if e[0] == "chunks_extracted"].count(("chunks_extracted", 1)) == big  # per chunk
    commits = [n for e, n in events if e == "chunks_committed"]
    assert sum(commits) == big and len(commits) == -(-big // 4)
    done = [i for i, (e, _) in enumerate(events) if e == "documents_committed"]
    last_window = max(i for i, (e, _) in enumerate(events) if e == "chunks_committed")
    assert last_window < done[-1] and sum(events[i][1] for i in done) == 2


# --- kill -9 mid-document --------------------------------------------------------------


def run_worker(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, str(WORKER), str(workdir), str(workdir / "out.json"), *args],
        capture_output=True, text=True, timeout=300, env=env,
    )


async def _state(workdir: Path) -> dict:
    stores = build_stores(Settings(working_dir=workdir), 32)
    await stores.open()
    try:
        snap = await store_snapshot(stores)
        records = await stores.doc_status.get(sorted(snap["doc_status"]))
        snap["records"] = {r.id: (r.status.value, r.chunk_ids, r.metadata) for r in records if r}
        snap["problems"] = [(p.kind, p.item) for p in (await check(stores)).problems]
    finally:
        await stores.close()
    return snap


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[dict, dict]:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    proc = run_worker(workdir)
    assert proc.returncode == 0, proc.stderr
    out = json.loads((workdir / "out.json").read_text())
    state = asyncio.run(_state(workdir))
    assert state["problems"] == [] and len(state["nodes"]) > 20
    return state, out


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
@pytest.mark.parametrize(
    ("kill", "committed_windows"),
    [
        ("chunks_extracted/10", 2),  # window 3 under way, nothing of it written
        ("chunks_committed/2", 2),  # right after window 2 and its mark
        ("flush/3", 2),  # window 3 flushed, its mark not yet written: redone, not doubled
    ],
)
def test_kill_mid_document_then_rerun_resumes_cleanly(tmp_path, uninterrupted, kill, committed_windows):
    reference, ref_out = uninterrupted
    killed = run_worker(tmp_path, "--kill", kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    cut = asyncio.run(_state(tmp_path))
    big = max(cut["records"], key=lambda i: len(cut["records"][i][1]))
    status, ids, metadata = cut["records"][big]
    assert status == DocStatus.PROCESSING.value and metadata[COMMITTED_MARK] == committed_windows * 4

    resumed = run_worker(tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    after = asyncio.run(_state(tmp_path))
    assert after == reference  # nothing lost, nothing duplicated, check clean, no mark left
    assert big in out["recovered"]
    # Only the chunks after the mark were extracted again.
    extracted = sum(n for e, n in out["events"] if e == "chunks_extracted")
    small_chunks = ref_out["chunks"] - len(ids)
    assert extracted == len(ids) - committed_windows * 4 + small_chunks


def test_cli_progress_shows_a_large_documents_chunks(tmp_path):
    """``ragkit index`` with ``RAGKIT_PROGRESS=plain`` prints lines (no terminal
    needed) that count a windowed document's chunks committed out of planned."""
    big = window_worker.documents()[0].content
    (tmp_path / "big.txt").write_text(big, encoding="utf-8")
    env = {
        **os.environ, "PYTHONPATH": str(REPO), "RAGKIT_WORKING_DIR": str(tmp_path / "data"),
        "RAGKIT_LLM": "offline", "RAGKIT_EMBEDDER": "hash", "RAGKIT_PROGRESS": "plain",
        "RAGKIT_INDEX__CHUNK_SIZE": str(window_worker.CHUNK_SIZE),
        "RAGKIT_INDEX__CHUNK_OVERLAP": str(window_worker.OVERLAP), "RAGKIT_INDEX__WINDOW_CHUNKS": "4",
    }
    code = "import sys; from ragkit.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, "index", "--json", str(tmp_path / "big.txt")],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    chunks = json.loads(proc.stdout)["chunks"]
    assert chunks > 12
    lines = proc.stderr.splitlines()
    assert any(f"large documents: 0/{chunks} chunks committed" in line for line in lines[:2])
    assert "1/1 documents" in lines[-1] and f"large documents: {chunks}/{chunks} chunks committed" in lines[-1]


async def test_two_large_documents_run_one_after_the_other(tmp_path):
    """One large document at a time holds a window of extractions: the second
    one's plan comes after the first one's last window."""
    from ragkit.testing.replay import load_musique

    corpus = load_musique()[0]
    docs = [
        Document.from_text("\n\n".join(p["title"] + "\n" + p["text"] for p in corpus[a : a + 10]))
        for a in (300, 320)
    ]
    events: list[tuple[str, int]] = []
    rag = window_worker.make_rag(tmp_path, 4, lambda e, n: events.append((e, n)))
    async with rag:
        report = await rag.indexer().insert(docs)
        assert sorted(report.processed) == sorted(d.id for d in docs) and not report.failed
        assert (await check(rag.stores)).problems == []
    plans = [i for i, (e, _) in enumerate(events) if e == "chunks_planned"]
    assert len(plans) == 2
    committed_before_second = sum(n for e, n in events[: plans[1]] if e == "chunks_committed")
    assert committed_before_second == events[plans[0]][1]
