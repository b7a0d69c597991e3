"""What each query mode makes PostgreSQL do: statements (round trips) per
store per query and the server's time on them, at several ``top_k``, read
from the server's own statement log.

    python benchmarks/pg_profile.py --inputs DIR [--factor 1] [--docs N] [--top-ks 10,40] [--questions 20] [--explain]

Starts its own PostgreSQL with pgvector (``_postgres.bench_postgres``),
indexes the scale run's corpus ×``--factor`` into it (every store on
PostgreSQL), then turns on ``log_min_duration_statement = 0`` (``--explain``:
also ``auto_explain`` with ``ANALYZE``, so the log holds each statement's
plan) and asks the questions in every mode. A statement is attributed to a
store by the table it names; ``BEGIN``/``COMMIT`` to the store of the
statement they wrap (the same backend process). ``--inputs`` is a folder
``bench_ragkit.py prepare`` wrote. Prints a table, and writes JSON with
``--out``; ``--explain`` also copies the log (``--log``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import signal
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _postgres import STORES, backend_settings, bench_postgres  # noqa: E402
from _shared import SimulatedLatency, read_json, run_record, run_started, write_json  # noqa: E402
from bench_ragkit import (  # noqa: E402
    MODES,
    BenchLLM,
    CountingEmbedder,
    BenchHashEmbedder,
    ScaledReplay,
    add_rag_args,
    make_rag,
    query_param,
    scaled_passages,
)


LINE = re.compile(r"^(\d+) .*?duration: ([\d.]+) ms\s+(statement|execute [^:]*|parse [^:]*|bind [^:]*):\s*(.*)$")
TABLES = (("_kv ", "kv"), ("_doc_status", "doc_status"), ("_vectors_", "vector"), ("_vector_stores", "vector"),
          ("hnsw.", "vector"), ("_nodes", "graph"), ("_edges", "graph"))


def store_of(sql: str) -> str | None:
    for needle, store in TABLES:
        if needle in sql + " ":
            return store
    return None


def attribute(lines: list[str]) -> tuple[Counter, dict[str, float]]:
    """Round trips and server ms per store of one query's log lines. A round
    trip is an ``execute`` or a simple ``statement``; ``parse``/``bind`` time
    is added to the server time only."""
    trips: Counter = Counter()
    ms: dict[str, float] = defaultdict(float)
    pending: dict[str, list[float]] = defaultdict(list)  # per backend: BEGINs waiting for their statement
    last: dict[str, str] = {}
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        pid, duration, kind, sql = m.group(1), float(m.group(2)), m.group(3), m.group(4).strip()
        word = sql.split(None, 1)[0].upper().rstrip(";") if sql else ""
        if word in ("BEGIN", "START"):
            pending[pid].append(duration)
            continue
        if word in ("COMMIT", "ROLLBACK", "RELEASE", "SAVEPOINT"):
            store = last.get(pid, "other")
        else:
            store = store_of(sql) or "other"
            last[pid] = store
            for d in pending.pop(pid, []):
                trips[store] += 1
                ms[store] += d
        if kind.startswith(("parse", "bind")):
            ms[store] += duration
            continue
        trips[store] += 1
        ms[store] += duration
    return trips, ms


async def run(args: argparse.Namespace, dsn: str, log: Path) -> dict[str, Any]:
    import asyncpg
    from ragkit.schema import Document

    replay = read_json(Path(args.inputs) / "replay.json")
    questions = read_json(Path(args.inputs) / "questions.json")[: args.questions]
    passages = scaled_passages([p["text"] for p in replay["passages"]][: args.docs or None], args.factor)
    settings = __import__("json").loads(backend_settings(dsn)[1])
    embedder = CountingEmbedder(BenchHashEmbedder(args.dimension))
    rag = make_rag(Path(tempfile.mkdtemp(prefix="ragkit-pgprofile-")), BenchLLM(ScaledReplay(), SimulatedLatency(0, 0, 0)),
                   embedder, args, **settings, workspace="profile")
    out: dict[str, Any] = {}
    async with rag:
        await rag.indexer().insert([Document.from_text(t) for t in passages])
        conn = await asyncpg.connect(dsn)
        await conn.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
        await conn.execute("ALTER SYSTEM SET log_line_prefix = '%p '")
        if args.explain:
            await conn.execute("ALTER SYSTEM SET session_preload_libraries = 'auto_explain'")
            await conn.execute("ALTER SYSTEM SET auto_explain.log_min_duration = 0")
            await conn.execute("ALTER SYSTEM SET auto_explain.log_analyze = on")
        await conn.execute("SELECT pg_reload_conf()")
        await conn.close()
    async with make_rag(Path(tempfile.mkdtemp(prefix="ragkit-pgprofile-")),
                        BenchLLM(ScaledReplay(), SimulatedLatency(0, 0, 0)), embedder, args, **settings,
                        workspace="profile") as rag:
        for top_k in [int(x) for x in args.top_ks.split(",")]:
            for mode in MODES + ["ppr"]:
                per_q = []
                for q in questions:
                    await rag.aquery(q["question"], query_param(mode, q, args, top_k=top_k))  # warm: statements prepared
                    start = log.stat().st_size
                    await rag.aquery(q["question"], query_param(mode, q, args, top_k=top_k))
                    await asyncio.sleep(0.05)  # the log is written by the server, a moment later
                    with log.open(encoding="utf-8", errors="replace") as f:
                        f.seek(start)
                        per_q.append(attribute(f.read().splitlines()))
                out[f"{mode}@{top_k}"] = {
                    store: {"round_trips": statistics.median(t[store] for t, _ in per_q),
                            "round_trips_max": max(t[store] for t, _ in per_q),
                            "server_ms": round(statistics.median(m[store] for _, m in per_q), 2)}
                    for store in (*STORES, "other") if any(t[store] for t, _ in per_q)
                }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", required=True)
    p.add_argument("--factor", type=int, default=1)
    p.add_argument("--docs", type=int, default=0, help="first N passages (0: all)")
    p.add_argument("--questions", type=int, default=20)
    p.add_argument("--explain", action="store_true")
    p.add_argument("--log", type=Path, default=None, help="copy the server log here")
    p.add_argument("--out", type=Path, default=None)
    add_rag_args(p)
    p.add_argument("--top-ks", default="10,40", help="comma list of top_k to profile")
    p.add_argument("--port", default="0", help="the server's port (0: a free one)")
    p.add_argument("--chunk-ranking", default="support")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out
    started = run_started()
    work = Path(tempfile.mkdtemp(prefix="ragkit-pgprofile-"))
    with bench_postgres(work, args.port) as (dsn, data):
        log = data.parent / "server.log"
        result = asyncio.run(run(args, dsn, log))
        if args.log:
            shutil.copy(log, args.log)
    for key, stores in result.items():
        print(f"{key:12s} " + "  ".join(f"{s}: {v['round_trips']:g} rt ({v['round_trips_max']} max) "
                                         f"{v['server_ms']:.2f} ms" for s, v in stores.items()))
    if args.out:
        write_json(args.out, run_record("pg_profile", started, modes=result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
