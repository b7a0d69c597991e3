"""Child process for ``test_windows.py``: index one document window by window
(and a small one beside it) with the offline LLM, and SIGKILL itself at a
chosen point.

Usage: ``python window_worker.py WORKING_DIR OUT_JSON [--window N] [--kill EVENT/K]``

``--kill chunks_extracted/10`` kills the process when the 10th chunk of the
large document is extracted (window 3 under way, not committed); ``chunks_committed/K`` after
window K's commit and mark; ``flush/K`` right after the K-th flush of all
stores (the window is durable, its mark not yet written). On a normal finish
OUT_JSON gets the progress events and the LLM's real calls per role.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from ragkit.offline.llm import OfflineLLM
from ragkit.pipeline.index import IndexConfig
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import load_musique

CHUNK_SIZE, OVERLAP = 64, 8


def documents() -> list[Document]:
    corpus = load_musique()[0]
    big = "\n\n".join(p["title"] + "\n" + p["text"] for p in corpus[100:112])
    small = corpus[200]["title"] + "\n" + corpus[200]["text"]
    return [Document.from_text(big, file_path="big.txt"), Document.from_text(small, file_path="small.txt")]


def make_rag(workdir: Path, window: int, progress) -> RAG:
    return RAG(
        Settings(working_dir=workdir),
        llm=OfflineLLM(),
        embedder=HashEmbedder({"dimension": 32}),
        index=IndexConfig(chunk_size=CHUNK_SIZE, chunk_overlap=OVERLAP, window_chunks=window, llm_concurrency=2),
        progress=progress,
    )


async def run(workdir: Path, window: int, kill: str | None) -> dict:
    events: list[tuple[str, int]] = []
    target, _, nth = (kill or "//").partition("/")
    seen = {"n": 0}

    def die_at(name: str) -> None:
        if name == target:
            seen["n"] += 1
            if seen["n"] == int(nth):
                os.kill(os.getpid(), signal.SIGKILL)

    def progress(event: str, n: int) -> None:
        events.append((event, n))
        if event != "chunks_extracted" or n == 1:  # a window's chunk, not the small document (2 chunks)
            die_at(event)

    rag = make_rag(workdir, window, progress)
    async with rag:
        flush = rag.stores.flush

        async def flush_then_maybe_die() -> None:
            await flush()
            die_at("flush")

        rag.stores.flush = flush_then_maybe_die  # type: ignore[method-assign]
        report = await rag.indexer().insert(documents())
        stats = rag.llm.stats.as_dict()  # indexer() built the cached LLM
    return {
        "events": events,
        "processed": report.processed,
        "failed": report.failed,
        "recovered": report.recovered,
        "chunks": report.chunks,
        "calls": stats.get("calls", {}),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--kill")
    args = parser.parse_args()
    result = asyncio.run(run(args.workdir, args.window, args.kill))
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
