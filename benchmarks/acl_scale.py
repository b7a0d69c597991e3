"""A principal's query overhead at 1k, 10k and 100k documents (issue 26, item 3).

    python benchmarks/acl_scale.py [--sizes 1000,10000,100000] [--passages 200] [--questions 20]
                                   [--modes naive,local,mix] [--repeats 2] [--out FILE]

Indexes the first ``--passages`` MuSiQue passages (zero-latency replay, the
feature-hashing embedder), passage ``i`` readable only by group ``g{i % 10}``,
then grows the workspace to each size with synthetic *status records* only:
processed documents, group ``g{i % 10}``, two chunk ids each that no index
holds. What the benchmark holds fixed: the graph, the vectors, the chunks and
the extractions (those of the real passages); what grows: the status records,
and with them the principal's readable set (half of them: the principal reads
``g0``-``g4``), its documents' and chunks' ids.

At each size, per mode and question, an unscoped query and one as the
principal, alternated so that the machine's noise falls on both alike; the
overhead is the difference of the median CPU milliseconds (the process's,
``time.process_time``: far less sensitive than wall time to other work on a
shared machine). Also per size: resolving the principal's scope directly,
warm (kept, ``ReadableScopes``), right after one status write (a record whose
access list alternates between a group the principal has and one it lacks:
the kept scope follows the doc-status change feed), and from a full read of
the records (what every query paid before the kept scopes, and the first
query after any write before the feed; ``--no-full-read`` skips it). Target:
overhead at the largest size within 1.5x of the smallest's.

Runs against an older ragkit too (``PYTHONPATH=<checkout>``): every query is
then cold.
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
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ragkit import BenchLLM, make_rag, query_param  # noqa: E402

from _shared import SimulatedLatency  # noqa: E402

GROUPS = 10
READS = 5
"""The principal's groups: g0..g4 of g0..g9, half of every size."""


def cpu_ms(started: float) -> float:
    return 1000 * (time.process_time() - started)


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


async def grow(rag, size: int, have: int) -> int:
    """Synthetic processed status records up to ``size`` documents in all."""
    from ragkit.access import AccessList
    from ragkit.schema import DocStatus, DocStatusRecord

    now = datetime.now(timezone.utc)
    lists = [AccessList(groups=[f"g{g}"]) for g in range(GROUPS)]
    async with rag.stores.writing("benchmark: synthetic status records"):
        for start in range(have, size, 5000):
            await rag.stores.doc_status.upsert(
                DocStatusRecord(id=f"doc-synthetic-{i:07d}", status=DocStatus.PROCESSED, created_at=now,
                                updated_at=now, content_hash=f"h{i}", content_length=100,
                                chunk_ids=[f"chunk-synthetic-{i:07d}-{j}" for j in range(2)],
                                access=lists[i % GROUPS])
                for i in range(start, min(size, start + 5000))
            )
    return size


async def scope_times(rag, principal, repeats: int, full_read: bool) -> dict:
    """CPU ms of resolving the principal's scope: warm (nothing written since
    the last resolve), after one status write, and from a full read."""
    from ragkit.access import AccessList
    from ragkit.core.scope import ReadableScopes, resolve_scope

    stores = rag.stores
    (one,) = (await stores.doc_status.list_page(limit=1, cursor="doc-synthetic-")).items
    warm, written, full, readable = [], [], [], 0
    for i in range(repeats):
        group = "g0" if i % 2 else "g9"  # in the principal's scope, then out of it
        async with stores.writing("benchmark: one status write"):
            await stores.doc_status.upsert([one.model_copy(update={"access": AccessList(groups=[group])})])
        started = time.process_time()
        scope = await resolve_scope(stores, None, None, principal)
        written.append(cpu_ms(started))
        assert scope is not None and (one.id in scope.doc_ids) == (group == "g0")
        for _ in range(5):
            started = time.process_time()
            await resolve_scope(stores, None, None, principal)
            warm.append(cpu_ms(started))
        readable = len(scope.doc_ids)
    # Apart, after: the garbage of a full read (100,000 records decoded) makes
    # the collector's next full pass land on whatever is timed next.
    for _ in range(repeats if full_read else 0):
        ReadableScopes.of(stores.doc_status).reset(None)  # what is kept is gone: read every record
        started = time.process_time()
        await resolve_scope(stores, None, None, principal)
        full.append(cpu_ms(started))
    row = {"scope_warm_cpu_ms": median(warm), "scope_after_one_write_cpu_ms": median(written),
           "readable_docs": readable}
    if full:
        row["scope_full_read_cpu_ms"] = median(full)
    return row


async def queries(rag, questions, modes, args, principal) -> dict:
    out = {}
    for mode in modes:
        times: dict[str, list[float]] = {"unscoped": [], "principal": []}
        for _ in range(args.repeats):
            for i, q in enumerate(questions):
                order = (("unscoped", None), ("principal", principal))
                for label, who in order if i % 2 else order[::-1]:
                    started = time.process_time()
                    await rag.aquery(q["question"], query_param(mode, q, args), principal=who)
                    times[label].append(cpu_ms(started))
        row = {f"{k}_cpu_ms": median(v) for k, v in times.items()}
        row["overhead_cpu_ms"] = round(row["principal_cpu_ms"] - row["unscoped_cpu_ms"], 3)
        out[mode] = row
        print(f"  {mode}: {json.dumps(row)}", flush=True)
    return out


async def main(args: argparse.Namespace) -> dict:
    import bench_ragkit

    from ragkit.access import AccessList, Principal
    from ragkit.schema import Document
    from ragkit.testing.replay import ReplayLLM

    inputs = Path(tempfile.mkdtemp(prefix="ragkit-acl-scale-"))
    bench_ragkit.prepare(argparse.Namespace(inputs=inputs, questions=None))
    replay = bench_ragkit.read_json(inputs / "replay.json")
    questions = bench_ragkit.read_json(inputs / "questions.json")[: args.questions]
    passages = [p["text"] for p in replay["passages"]][: args.passages]
    docs = [Document.from_text(t).model_copy(update={"access": AccessList(groups=[f"g{i % GROUPS}"])})
            for i, t in enumerate(passages)]
    principal = Principal(user="reader", groups=frozenset(f"g{i}" for i in range(READS)))
    modes = args.modes.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict = {
        "what": "a principal's query overhead (principal minus unscoped, median CPU ms) as status records grow",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_avg": os.getloadavg()},
        "command": " ".join(sys.argv), "passages": len(docs), "questions": len(questions),
        "repeats": args.repeats, "principal_groups": sorted(principal.groups), "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="ragkit-acl-scale-") as tmp:
        rag = make_rag(Path(tmp), BenchLLM(ReplayLLM(), SimulatedLatency(0.0, 0.0, 0)), "hash", args)
        async with rag:
            await rag.indexer().insert(docs)
            have = len(docs)
            for size in sizes:
                have = await grow(rag, size, have)
                print(f"{size} documents", flush=True)
                for mode in modes:  # warm-up: caches of the index side, the scope kept
                    for q in questions[:2]:
                        await rag.aquery(q["question"], query_param(mode, q, args), principal=principal)
                row = {"modes": await queries(rag, questions, modes, args, principal)}
                row.update(await scope_times(rag, principal, args.scope_repeats, args.full_read))
                row["overhead_cpu_ms_median_of_modes"] = median([m["overhead_cpu_ms"] for m in row["modes"].values()])
                print(f"  scope: warm {row['scope_warm_cpu_ms']} ms, after one write {row['scope_after_one_write_cpu_ms']} ms, "
                      f"full read {row.get('scope_full_read_cpu_ms')} ms", flush=True)
                results["sizes"][str(size)] = row
    first, last = results["sizes"][str(sizes[0])], results["sizes"][str(sizes[-1])]
    results["ratio_last_to_first"] = {
        mode: round(last["modes"][mode]["overhead_cpu_ms"] / first["modes"][mode]["overhead_cpu_ms"], 3)
        if first["modes"][mode]["overhead_cpu_ms"] > 0 else None for mode in modes
    }
    results["scope_after_one_write_ratio_last_to_first"] = round(
        last["scope_after_one_write_cpu_ms"] / first["scope_after_one_write_cpu_ms"], 3)
    results["target"] = "overhead at the largest size within 1.5x of the smallest's"
    return results


if __name__ == "__main__":
    import bench_ragkit

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--passages", type=int, default=200)
    p.add_argument("--questions", type=int, default=20)
    p.add_argument("--modes", default="naive,local,mix")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--scope-repeats", type=int, default=6)
    p.add_argument("--no-full-read", dest="full_read", action="store_false",
                   help="skip timing a full read of the records (seconds at 100k)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "acl_scale.json"))
    bench_ragkit.add_rag_args(p)
    args = p.parse_args()
    out = asyncio.run(main(args))
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"ratio_last_to_first": out["ratio_last_to_first"]}))
