"""Query latency with and without a principal (document access control).

    python benchmarks/acl_query.py [--docs N] [--modes local,global,mix,ppr,naive] [--repeats 3] [--shares 10,50,90]

Indexes the MuSiQue passages (zero-latency replay, the feature-hashing
embedder), passage ``i`` readable only by the group ``g{i % 10}``, then asks
every dev question in each mode, context only, with the keywords and budgets of
``bench.py``: first unscoped (``principal=None``), then as principals that read
each share of the documents (``--shares``: 10 = one group of ten). Prints per
mode and reader the median and p95 milliseconds per query (wall) and the
median CPU milliseconds. (The first version left half the passages public and
gave its principal the other half: it read everything, so its figures of
2026-12-01 measure the unscoped path plus resolving the scope.)

Runs against an older ragkit without access lists too (the unscoped figures
only): ``PYTHONPATH=<a checkout> python benchmarks/acl_query.py`` measures the
unscoped queries before the change, on the same index and questions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ragkit import BenchLLM, make_rag, query_param  # noqa: E402

from _shared import SimulatedLatency  # noqa: E402


async def timed(rag, questions, mode, args, **kw) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds per query (CPU time: the process's, all
    threads; far less sensitive than wall time to other work on the machine)."""
    wall, cpu = [], []
    for _ in range(args.repeats):
        for q in questions:
            started, started_cpu = time.perf_counter(), time.process_time()
            await rag.aquery(q["question"], query_param(mode, q, args), **kw)
            wall.append(1000 * (time.perf_counter() - started))
            cpu.append(1000 * (time.process_time() - started_cpu))
    return wall, cpu


def summary(times: tuple[list[float], list[float]]) -> dict:
    wall, cpu = sorted(times[0]), sorted(times[1])
    return {"median_ms": round(statistics.median(wall), 2), "p95_ms": round(wall[int(0.95 * (len(wall) - 1))], 2),
            "median_cpu_ms": round(statistics.median(cpu), 2)}


async def main(args: argparse.Namespace) -> None:
    import bench_ragkit

    from ragkit.schema import Document
    from ragkit.testing.replay import ReplayLLM

    scoped = "access" in Document.model_fields
    inputs = Path(tempfile.mkdtemp(prefix="ragkit-acl-bench-"))
    bench_ragkit.prepare(argparse.Namespace(inputs=inputs, questions=None))
    replay = bench_ragkit.read_json(inputs / "replay.json")
    questions = bench_ragkit.read_json(inputs / "questions.json")[: args.questions or None]
    passages = [p["text"] for p in replay["passages"]][: args.docs or None]
    docs = [Document.from_text(t) for t in passages]
    readers: dict[str, object] = {}
    if scoped:
        from ragkit.access import AccessList, Principal

        docs = [d.model_copy(update={"access": AccessList(groups=[f"g{i % 10}"])}) for i, d in enumerate(docs)]
        for share in (int(x) for x in args.shares.split(",")):
            readers[f"reads {share}%"] = Principal(user="u", groups=frozenset(f"g{i}" for i in range(share // 10)))
    results: dict = {"passages": len(docs), "questions": len(questions), "repeats": args.repeats, "modes": {}}
    with tempfile.TemporaryDirectory(prefix="ragkit-acl-bench-") as tmp:
        rag = make_rag(Path(tmp), BenchLLM(ReplayLLM(), SimulatedLatency(0.0, 0.0, 0)), "hash", args)
        async with rag:
            await rag.indexer().insert(docs)
            for mode in args.modes.split(","):
                await timed(rag, questions[:3], mode, argparse.Namespace(**{**vars(args), "repeats": 1}))  # warm-up
                row = {"unscoped": summary(await timed(rag, questions, mode, args))}
                for label, principal in readers.items():
                    row[label] = summary(await timed(rag, questions, mode, args, principal=principal))
                results["modes"][mode] = row
                print(mode, json.dumps(row), flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    import bench_ragkit

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", default="local,global,mix,ppr,naive")
    p.add_argument("--docs", type=int, default=0)
    p.add_argument("--questions", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--shares", default="10,50,90", help="percent of the documents each principal reads")
    bench_ragkit.add_rag_args(p)
    asyncio.run(main(p.parse_args()))
