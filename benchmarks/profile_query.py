"""Where ragkit's query time goes: cProfile over the context building of every
question in one mode.

    python benchmarks/profile_query.py [--mode mix] [--docs N] [--top 25]

Indexes the passages (zero-latency replay, the feature-hashing embedder, so the
index is built in about half a minute) into a temporary folder, asks every dev
question once to warm up, then profiles a second pass and prints the stage
timings (``QueryResult.metadata["timings"]``, medians) and the functions with
the most cumulative time. Uses the same keywords and budgets as ``bench.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ragkit import BenchLLM, make_rag, query_param  # noqa: E402

from _shared import SimulatedLatency  # noqa: E402


async def main(args: argparse.Namespace) -> None:
    from ragkit.schema import Document
    from ragkit.testing.replay import ReplayLLM

    import bench_ragkit

    inputs = Path(tempfile.mkdtemp(prefix="ragkit-profile-"))
    bench_ragkit.prepare(argparse.Namespace(inputs=inputs, questions=None))
    replay = bench_ragkit.read_json(inputs / "replay.json")
    questions = bench_ragkit.read_json(inputs / "questions.json")
    passages = [p["text"] for p in replay["passages"]][: args.docs or None]
    with tempfile.TemporaryDirectory(prefix="ragkit-profile-") as tmp:
        rag = make_rag(Path(tmp), BenchLLM(ReplayLLM(), SimulatedLatency(0.0, 0.0, 0)), "hash", args)
        async with rag:
            await rag.indexer().insert([Document.from_text(t) for t in passages])
            for q in questions:  # warm-up
                await rag.aquery(q["question"], query_param(args.mode, q, args))
            stages: dict[str, list[float]] = {}
            chunks = []
            profiler = cProfile.Profile()
            started = time.perf_counter()
            profiler.enable()
            for q in questions:
                result = await rag.aquery(q["question"], query_param(args.mode, q, args))
                for k, v in result.metadata["timings"].items():
                    stages.setdefault(k, []).append(v)
                chunks.append(len(result.chunks))
            profiler.disable()
            wall = time.perf_counter() - started
    print(f"{len(questions)} questions, mode {args.mode}, {len(passages)} passages, "
          f"{wall:.2f} s under the profiler; chunks in context: median {statistics.median(chunks)}")
    print("stage medians (ms):", {k: round(1000 * statistics.median(v), 1) for k, v in stages.items()})
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    import bench_ragkit

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="mix")
    p.add_argument("--docs", type=int, default=0)
    p.add_argument("--top", type=int, default=25)
    bench_ragkit.add_rag_args(p)
    asyncio.run(main(p.parse_args()))
