"""Retrieval quality per query mode on the MuSiQue dev questions (ragkit alone;
the side-by-side run with LightRAG is ``benchmarks/compare.py`` when present).

    python benchmarks/query_recall.py [--questions PATH] [--docs N] [--embedder hash]

Indexes the corpus (one document per passage) with the replay LLM into a fresh
temporary workspace, then builds the context only (no answer call) for every
question and mode with the data set's keyword rule (low-level: corpus entity
names found in the question; high-level: its content words), and measures:

- recall: supporting passages found in the context / supporting passages;
- all: fraction of questions with every supporting passage in the context;
- any: fraction of questions with at least one supporting passage in the context;
- recall@2, recall@5: of the ranked chunk list;
- context tokens (mean) and context-building latency (p50, p95).

Writes ``benchmarks/results/query_recall.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ragkit
from ragkit.rag import RAG
from ragkit.schema import Document, QueryParam
from ragkit.sections.index import IndexConfig
from ragkit.settings import Settings
from ragkit.testing.musique_keywords import question_keywords
from ragkit.testing.recall import gold_passages, passage_text, score, summarise
from ragkit.testing.replay import ReplayLLM, load_musique, musique_dir

MODES = ["naive", "local", "global", "hybrid", "mix"]
RESULTS = Path(__file__).parent / "results"


async def run(args: argparse.Namespace) -> dict:
    corpus, _, dev = load_musique()
    questions = json.loads(Path(args.questions).read_text()) if args.questions else dev
    corpus = corpus[: args.docs] if args.docs else corpus
    docs = [Document.from_text(passage_text(p["title"], p["text"])) for p in corpus]
    with tempfile.TemporaryDirectory() as tmp:
        rag = RAG(
            Settings(working_dir=Path(tmp), embedder={"name": args.embedder, "options": json.loads(args.embedder_options)}),
            llm=ReplayLLM(),
            index=IndexConfig(llm_concurrency=8),
        )
        async with rag:
            started = time.perf_counter()
            report = await rag.indexer().insert(docs)
            index_seconds = time.perf_counter() - started
            names = rag.llm.llm.recording.entity_names()
            rows = {mode: await measure(rag, questions, mode, names, args) for mode in MODES}
    return {
        "benchmark": "query_recall",
        "ragkit": ragkit.__version__,
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "command": " ".join(sys.argv),
        "data": str(musique_dir()),
        "documents": len(docs),
        "indexed": len(report.processed),
        "index_seconds": round(index_seconds, 2),
        "questions": len(questions),
        "embedder": args.embedder,
        "budgets": QueryParam().model_dump(include={"top_k", "chunk_top_k", "max_entity_tokens",
                                                     "max_relation_tokens", "max_total_tokens"}),
        "modes": rows,
    }


async def measure(rag: RAG, questions: list[dict], mode: str, names, args) -> dict:
    rows, tokens, latency = [], [], []
    for q in questions:
        high, low = question_keywords(q["question"], names)
        started = time.perf_counter()
        result = await rag.aquery(q["question"], QueryParam(
            mode=mode, only_need_context=True, high_level_keywords=high, low_level_keywords=low or high,
        ))
        latency.append(time.perf_counter() - started)
        rows.append(score([c["content"] for c in result.chunks], gold_passages(q)))
        tokens.append(result.metadata["tokens"]["context"])
    latency.sort()
    return {
        **summarise(rows),
        "context_tokens_mean": round(statistics.mean(tokens)),
        "latency_p50_ms": round(1000 * latency[len(latency) // 2], 1),
        "latency_p95_ms": round(1000 * latency[min(len(latency) - 1, int(len(latency) * 0.95))], 1),
    }


def print_table(result: dict) -> None:
    cols = ["recall", "any_supporting", "all_supporting", "recall@2", "recall@5", "context_tokens_mean",
            "latency_p50_ms", "latency_p95_ms"]
    print(f"{result['questions']} questions, {result['documents']} passages, embedder {result['embedder']}")
    print("mode     " + "  ".join(f"{c:>19}" for c in cols))
    for mode, row in result["modes"].items():
        print(f"{mode:<8} " + "  ".join(f"{row[c]:>19}" for c in cols))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", help="questions file (default: the MuSiQue dev questions)")
    parser.add_argument("--docs", type=int, help="only the first N passages (default: all)")
    parser.add_argument("--embedder", default="hash", help="registered embedder name (default: hash)")
    parser.add_argument("--embedder-options", default='{"dimension": 384}', help="JSON options for the embedder")
    parser.add_argument("--out", default=str(RESULTS / "query_recall.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
