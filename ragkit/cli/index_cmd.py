"""``ragkit index PATH...``: load, chunk, extract, merge and index."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from ragkit.cli.output import print_json
from ragkit.rag import RAG
from ragkit.settings import load_settings


class ProgressLine:
    """One self-overwriting status line on stderr (only when it is a terminal)."""

    def __init__(self, total: int, llm_stats) -> None:
        self.total = total
        self.done = 0
        self.started = time.perf_counter()
        self.stats = llm_stats
        self.enabled = sys.stderr.isatty()

    def __call__(self, event: str, n: int) -> None:
        if event == "documents_committed":
            self.done += n
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        stats = self.stats()
        calls = sum(stats.calls.values()) if stats else 0
        tokens = sum(stats.input_tokens.values()) + sum(stats.output_tokens.values()) if stats else 0
        sys.stderr.write(
            f"\r{self.done}/{self.total} documents  {calls} LLM calls  {tokens} tokens  "
            f"{elapsed:.0f}s elapsed  ETA {eta:.0f}s   "
        )
        sys.stderr.flush()


async def _index(args: argparse.Namespace) -> dict:
    settings = load_settings(args.config).settings
    rag = RAG(settings)
    from ragkit.pipeline.load import load_documents

    loaded = load_documents(args.paths)
    progress = ProgressLine(len(loaded.documents), lambda: rag._cached_llm.stats if rag._cached_llm else None)
    rag.progress = progress
    async with rag:
        report = await rag.indexer().insert(loaded.documents)
        counts = await rag.astatus()
        nodes, edges = await rag.stores.graph.node_count(), await rag.stores.graph.edge_count()
    if progress.enabled:
        sys.stderr.write("\n")
    return {
        "files": [item.__dict__ if hasattr(item, "__dict__") else item for item in loaded.items],
        "processed": len(report.processed),
        "skipped_unchanged": len(report.skipped),
        "failed": report.failed,
        "replaced": report.replaced,
        "recovered": report.recovered,
        "chunks": report.chunks,
        "dropped_extraction_rows": report.dropped_rows,
        "llm": report.llm,
        "seconds": round(report.seconds, 3),
        "status": counts,
        "graph": {"entities": nodes, "relations": edges},
    }


def run(args: argparse.Namespace) -> int:
    result = asyncio.run(_index(args))
    if args.json:
        print_json(result)
    else:
        problems = [f for f in result["files"] if _outcome(f) not in ("loaded",)]
        for item in problems:
            print(f"{_field(item, 'path')}: {_outcome(item)}: {_field(item, 'message')}")
        for doc_id, error in result["failed"].items():
            print(f"{doc_id}: failed: {error}")
        print(
            f"indexed {result['processed']} documents ({result['chunks']} chunks), "
            f"{result['skipped_unchanged']} unchanged, {len(result['failed'])} failed, "
            f"{len(result['replaced'])} old versions replaced in {result['seconds']}s; "
            f"graph: {result['graph']['entities']} entities, {result['graph']['relations']} relations"
        )
    return 1 if result["failed"] else 0


def _field(item, name: str):
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _outcome(item) -> str:
    return str(_field(item, "outcome"))
