"""Round trips and time per store, per query mode: embedded stores against the
server combination (Redis, a Chroma server, the Bolt server), at several ``top_k``.

    python benchmarks/store_calls.py --label before            # x1 and x5, top_k 10 and 40
    python benchmarks/store_calls.py --factors 1 --questions 10 --label quick

For each backend and corpus factor (``bench_ragkit.py scale``'s synthetic
expansion) a child process indexes the corpus (zero-latency replay, hashing
embedder), then asks every question in every mode once to warm up and once
measured, at each ``--top-k``. Every call a store's adapter makes to its
backend is counted and timed on the client (wall time of the protocol's
hooks, ``GraphStore._degrees`` and the like). Per server:

- Bolt (FalkorDB standing in for Neo4j): round trips are the statements the
  adapter runs. Its Bolt summary has no server timing (``t_first`` and
  ``t_last`` are the constants 2 and 1), so server time is measured by running
  every recorded read statement again through ``GRAPH.RO_QUERY`` on the
  module's Redis port, which reports its own execution time.
- Redis: round trips and server time from ``INFO commandstats`` (calls and
  microseconds per command), before and after each mode's pass.
- Chroma: round trips are the client's requests; the server exposes no
  timing, so none is reported.

Writes ``benchmarks/results/store_calls_<label>.json``; ``report.py`` shows the
``before`` and ``after`` files as tables in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _shared import SimulatedLatency, read_json, run_record, run_started, write_json  # noqa: E402

MODES = ["naive", "local", "global", "hybrid", "mix", "ppr"]
KINDS = ("kv", "doc_status", "vector", "graph")


class Meter:
    """Counts and times the calls each store makes to its backend."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # kind -> [calls, seconds]
        self.trips: dict[str, int] = defaultdict(int)  # kind -> client round trips (servers)
        self.statements: list[str] = []  # Bolt read statements, for the server-time replay

    def reset(self) -> None:
        self.hooks.clear()
        self.trips.clear()
        self.statements.clear()

    def instrument(self, stores: Any) -> None:
        from ragkit.protocols import DocStatusStore, GraphStore, KVStore, VectorStore

        bases = {"kv": KVStore, "doc_status": DocStatusStore, "vector": VectorStore, "graph": GraphStore}
        for store in stores.all():
            kind = next(k for k, base in bases.items() if isinstance(store, base))
            for name in sorted(getattr(bases[kind], "__abstractmethods__", ())):
                if asyncio.iscoroutinefunction(getattr(type(store), name, None)):
                    setattr(store, name, self._timed(kind, getattr(store, name)))
            # The calls that are one round trip each on the servers.
            if type(store).__module__.startswith("ragkit_neo4j"):
                store._read = self._trip(kind, store._read, record=True)
            elif type(store).__module__.startswith("ragkit_chroma"):
                store._call = self._trip(kind, store._call)

    def _timed(self, kind: str, fn: Any) -> Any:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                slot = self.hooks[kind]
                slot[0] += 1
                slot[1] += time.perf_counter() - t0

        return run

    def _trip(self, kind: str, fn: Any, record: bool = False) -> Any:
        @functools.wraps(fn)
        async def run(what: str, query: Any, *args: Any, **kwargs: Any) -> Any:
            self.trips[kind] += 1
            if record and isinstance(query, str):
                self.statements.append(query)
            return await fn(what, query, *args, **kwargs)

        return run


def redis_stats(url: str | None) -> dict[str, tuple[int, int]]:
    """``{command: (calls, usec)}`` from ``INFO commandstats``."""
    if not url:
        return {}
    import redis

    client = redis.Redis.from_url(url)
    try:
        info = client.info("commandstats")
    finally:
        client.close()
    return {k.removeprefix("cmdstat_"): (v["calls"], v["usec"]) for k, v in info.items()}


def redis_delta(before: dict, after: dict) -> tuple[int, int]:
    """Calls and microseconds between two snapshots, the ``INFO`` calls left out."""
    calls = usec = 0
    for cmd, (c, u) in after.items():
        if cmd.startswith("info"):
            continue
        c0, u0 = before.get(cmd, (0, 0))
        calls, usec = calls + c - c0, usec + u - u0
    return calls, usec


_EXEC_MS = re.compile(rb"internal execution time: ([0-9.]+) milliseconds")


def bolt_server_ms(port: int | None, statements: list[str]) -> float | None:
    """Summed execution time of ``statements`` as FalkorDB reports it when each
    runs again through ``GRAPH.RO_QUERY`` on its Redis port (read statements only)."""
    if not port:
        return None
    import redis

    client = redis.Redis(port=port)
    total = 0.0
    try:
        graph = client.execute_command("GRAPH.LIST")[0]
        for query in statements:
            reply = client.execute_command("GRAPH.RO_QUERY", graph, query)
            stats = reply[-1]
            total += sum(float(m.group(1)) for s in stats if (m := _EXEC_MS.search(s)))
    finally:
        client.close()
    return total


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from bench_ragkit import BenchLLM, CountingEmbedder, BenchHashEmbedder, ScaledReplay, make_rag, query_param
    from bench_ragkit import scaled_passages
    from ragkit.schema import Document

    replay = read_json(Path(args.inputs) / "replay.json")
    questions = read_json(Path(args.inputs) / "questions.json")[: args.questions or None]
    passages = scaled_passages([p["text"] for p in replay["passages"]], args.factor)
    settings = json.loads(args.backend_settings) if args.backend_settings else {}
    settings["workspace"] = f"calls-x{args.factor}"
    redis_url = settings.get("kv", {}).get("options", {}).get("url")
    meter = Meter()
    out: dict[str, Any] = {"backend": args.backend, "factor": args.factor, "docs": len(passages),
                           "questions": len(questions), "top_k": {}}
    with tempfile.TemporaryDirectory(prefix="ragkit-calls-") as tmp:
        embedder = CountingEmbedder(BenchHashEmbedder(args.dimension))
        llm = BenchLLM(ScaledReplay(), SimulatedLatency(0.0, 0.0, 0))
        async with make_rag(Path(tmp), llm, embedder, args, **settings) as rag:
            t0 = time.perf_counter()
            await rag.indexer().insert([Document.from_text(t) for t in passages])
            out["index_s"] = round(time.perf_counter() - t0, 1)
            meter.instrument(rag.stores)
            for top_k in args.top_k:
                args.top_k_now = top_k
                per_mode = {}
                for mode in MODES:
                    for q in questions:  # warm-up
                        await rag.aquery(q["question"], query_param(mode, q, args, top_k=top_k))
                    meter.reset()
                    seconds = []
                    r0 = redis_stats(redis_url)
                    for q in questions:
                        t0 = time.perf_counter()
                        await rag.aquery(q["question"], query_param(mode, q, args, top_k=top_k))
                        seconds.append(time.perf_counter() - t0)
                    r_calls, r_usec = redis_delta(r0, redis_stats(redis_url))
                    n = len(questions)
                    row: dict[str, Any] = {
                        "p50_ms": round(1000 * statistics.median(seconds), 2),
                        "mean_ms": round(1000 * statistics.mean(seconds), 2),
                        "calls": {k: round(meter.hooks[k][0] / n, 2) for k in KINDS},
                        "client_ms": {k: round(1000 * meter.hooks[k][1] / n, 2) for k in KINDS},
                    }
                    if args.backend == "servers":
                        bolt_ms = bolt_server_ms(args.bolt_redis_port, meter.statements)
                        row["round_trips"] = {"redis": round(r_calls / n, 2),
                                              "chroma": round(meter.trips["vector"] / n, 2),
                                              "bolt": round(meter.trips["graph"] / n, 2)}
                        row["server_ms"] = {"redis": round(r_usec / 1000 / n, 3), "chroma": None,
                                            "bolt": None if bolt_ms is None else round(bolt_ms / n, 2)}
                    per_mode[mode] = row
                    print(f"x{args.factor} {args.backend} top_k {top_k} {mode}: {row}", flush=True)
                out["top_k"][str(top_k)] = per_mode
    return out


def main(argv: list[str] | None = None) -> int:
    import bench_ragkit

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", nargs="?", default="all", choices=["all", "measure"])
    p.add_argument("--label", default="after", help="results/store_calls_<label>.json")
    p.add_argument("--factors", default="1,5", help="corpus multiples (bench_ragkit.py scale's expansion)")
    p.add_argument("--backends", default="embedded,servers")
    p.add_argument("--top-ks", default="10,40", help="top_k values to measure at")
    p.add_argument("--questions", type=int, default=0, help="first N questions (0: all)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--ports", default="6579,7887,6590,8200",
                   help="the servers' ports: Redis, Bolt, the Bolt server's Redis, Chroma")
    # child-process options
    p.add_argument("--inputs")
    p.add_argument("--factor", type=int, default=1)
    p.add_argument("--backend", default="embedded")
    p.add_argument("--backend-settings", default="")
    p.add_argument("--bolt-redis-port", type=int, default=0)
    bench_ragkit.add_rag_args(p)
    args = p.parse_args(argv)
    args.top_k = [int(x) for x in args.top_ks.split(",") if x]
    if args.run == "measure":
        write_json(args.out, asyncio.run(measure(args)))
        return 0

    import bench

    # Ports of its own, so that a bench.py run on this machine meanwhile is not disturbed.
    redis_port, bolt_port, bolt_redis_port, chroma_port = args.ports.split(",")
    bench.SERVER_PORTS.update(RAGKIT_REDIS_PORT=redis_port, RAGKIT_BOLT_PORT=bolt_port,
                              RAGKIT_BOLT_REDIS_PORT=bolt_redis_port)
    bench.CHROMA_PORT = chroma_port
    work = Path(tempfile.mkdtemp(prefix="ragkit-calls-"))
    inputs = work / "inputs"
    bench_ragkit.prepare(argparse.Namespace(inputs=inputs, questions=None))
    rows = []
    started = run_started()
    for factor in [int(x) for x in args.factors.split(",") if x]:
        for backend in args.backends.split(","):
            out = work / f"{backend}_{factor}.json"
            cmd = [sys.executable, __file__, "measure", "--inputs", str(inputs), "--out", str(out),
                   "--factor", str(factor), "--backend", backend, "--top-ks", args.top_ks,
                   "--questions", str(args.questions)]
            if backend == "servers":
                with bench.bench_servers(work) as settings:  # fresh servers per run
                    port = bench.SERVER_PORTS["RAGKIT_BOLT_REDIS_PORT"]
                    subprocess.run(cmd + settings + ["--bolt-redis-port", port], check=True, cwd=bench.ROOT)
            else:
                subprocess.run(cmd, check=True, cwd=bench.ROOT)
            rows.append(read_json(out))
    result = run_record("store_calls", started, label=args.label, runs=rows)
    path = args.out or HERE / "results" / f"store_calls_{args.label}.json"
    write_json(path, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
