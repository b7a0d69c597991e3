"""Indexing throughput against a simulated remote LLM, and the framework's own overhead.

    python benchmarks/index_latency.py [--docs N] [--latency S] [--jitter S]
                                       [--concurrency N] [--gleaning N] [--out FILE]

Two runs, each in a fresh temporary working dir on the embedded default stores
(SQLite KV and doc status, numpy vectors, networkx graph), each in its own
child process so that its peak memory is its own:

1. **latency**: the MuSiQue passages indexed through ``ReplayLLM`` (the real
   recorded extractions) wrapped so that every call sleeps
   ``latency + uniform(-jitter, +jitter)`` seconds (seeded RNG). The ideal wall
   time is ``calls x mean latency / concurrency``: what a perfect scheduler
   that always keeps ``concurrency`` calls in flight would need. ``ratio`` is
   wall / ideal (the issue asks for <= 1.3); ``efficiency`` is ideal / wall.
2. **zero latency**: the same documents with no sleep, so the wall time is
   the framework's own work (chunking, parsing, merging, embedding with the
   cheap ``HashEmbedder``, store writes): chunks/s and docs/s.

Peak memory is the process's peak resident set size (``resource.getrusage``
``ru_maxrss``), not tracemalloc, which would slow the run down; the RSS after
loading the data set, before indexing, is reported next to it.

Writes a JSON report (machine, settings, command line, both runs) and prints a
small table. The exit code does not depend on the ratio: this is a report,
not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import SimulatedLatency  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "index_latency.json"


@dataclass(frozen=True)
class RunSettings:
    docs: int | None
    latency: float
    jitter: float
    concurrency: int
    gleaning: int
    seed: int
    dimension: int


# -- the simulated remote model -------------------------------------------------


class LatencyLLM:
    """Wraps an LLM: every call first sleeps ``latency ± jitter`` (uniform, seeded).

    Keeps the delays it drew and the most calls it saw in flight at once."""

    def __init__(self, inner: Any, latency: float, jitter: float, seed: int) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.capabilities = inner.capabilities
        self.timing = SimulatedLatency(latency, jitter, seed)

    async def complete(self, request: Any) -> Any:
        async with self.timing.call():
            return await self.inner.complete(request)

    async def stream(self, request: Any) -> AsyncIterator[str]:
        yield (await self.complete(request)).text


class LoopLag:
    """How long the event loop was kept from running a 10 ms ticker: a blocked
    loop delays every LLM call that is due to finish."""

    def __init__(self, tick: float = 0.01) -> None:
        self.tick = tick
        self.samples: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.tick)
            self.samples.append(max(0.0, loop.time() - before - self.tick))

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def summary(self) -> dict[str, float]:
        s = sorted(self.samples) or [0.0]
        return {
            "max_ms": round(s[-1] * 1000, 1),
            "p99_ms": round(s[int(0.99 * (len(s) - 1))] * 1000, 1),
            "total_s": round(sum(s), 2),
        }


# -- one run (in a child process) -----------------------------------------------


def index_config(settings: RunSettings) -> Any:
    from ragkit.sections.index import IndexConfig

    return IndexConfig.model_validate(
        {"llm_concurrency": settings.concurrency, "extract": {"gleaning": settings.gleaning}}
    )


def _rss_mib() -> float:
    """Peak resident set size of this process so far (Linux: KiB; macOS: bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def run_once(settings: RunSettings, latency: float) -> dict[str, Any]:
    """Index the passages once; returns the measured figures."""
    from ragkit.rag import RAG
    from ragkit.schema import Document
    from ragkit.settings import Settings
    from ragkit.testing import HashEmbedder
    from ragkit.testing.replay import ReplayLLM, load_musique

    corpus = load_musique()[0]
    passages = corpus if settings.docs is None else corpus[: settings.docs]
    documents = [Document.from_text(p["title"] + "\n" + p["text"]) for p in passages]
    llm = LatencyLLM(ReplayLLM(), latency, settings.jitter if latency else 0.0, settings.seed)
    rss_before = _rss_mib()
    batches: list[int] = []

    def progress(event: str, n: int) -> None:
        if event == "documents_committed":
            batches.append(n)

    async def main(working_dir: Path) -> tuple[Any, dict[str, float]]:
        rag = RAG(
            Settings(working_dir=working_dir),
            llm=llm,
            embedder=HashEmbedder({"dimension": settings.dimension}),
            index=index_config(settings),
            progress=progress,
        )
        async with rag:
            with LoopLag() as lag:
                report = await rag.indexer().insert(documents)
        return report, lag.summary()

    with tempfile.TemporaryDirectory(prefix="ragkit-bench-") as tmp:
        started, cpu_started = time.perf_counter(), time.process_time()
        report, lag = asyncio.run(main(Path(tmp)))
        wall = time.perf_counter() - started  # includes opening and closing the stores
        cpu = time.process_time() - cpu_started

    calls = sum(report.llm["calls"].values())
    out: dict[str, Any] = {
        "latency_s": latency,
        "jitter_s": settings.jitter if latency else 0.0,
        "docs": len(documents),
        "processed": len(report.processed),
        "failed": len(report.failed),
        "chunks": report.chunks,
        "commit_batches": len(batches),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "insert_s": round(report.seconds, 3),
        "llm_calls": report.llm["calls"],
        "llm_calls_total": calls,
        "input_tokens": sum(report.llm["input_tokens"].values()),
        "output_tokens": sum(report.llm["output_tokens"].values()),
        "unknown_prompts": llm.inner.unknown_prompts,
        "peak_llm_in_flight": llm.timing.peak_in_flight,
        "loop_lag": lag,
        "peak_rss_mib": _rss_mib(),
        "rss_before_index_mib": rss_before,
        "docs_per_s": round(len(report.processed) / wall, 1),
        "chunks_per_s": round(report.chunks / wall, 1),
        "chunks_per_cpu_s": round(report.chunks / cpu, 1) if cpu else None,
    }
    if latency:
        mean = sum(llm.timing.delays) / len(llm.timing.delays) if llm.timing.delays else 0.0
        ideal = calls * mean / settings.concurrency
        out.update(
            mean_latency_s=round(mean, 4),
            ideal_s=round(ideal, 3),
            ratio=round(wall / ideal, 3) if ideal else None,
            efficiency=round(ideal / wall, 3) if wall else None,
        )
    return out


def _child(settings: RunSettings, latency: float, queue: Any) -> None:
    try:
        queue.put(("ok", run_once(settings, latency)))
    except BaseException as exc:  # report it in the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}"))
        raise


def run_isolated(settings: RunSettings, latency: float) -> dict[str, Any]:
    """``run_once`` in a fresh process, so peak RSS belongs to that run only."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(settings, latency, queue))
    proc.start()
    status, payload = queue.get()
    proc.join()
    if status != "ok":
        raise SystemExit(f"benchmark run failed: {payload}")
    return payload


# -- report -----------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    import ragkit

    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "ragkit": ragkit.__version__,
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),  # a noisy machine shows here
    }


def print_table(result: dict[str, Any]) -> None:
    lat, zero = result["latency_run"], result["zero_latency_run"]
    rows = [
        ("documents / chunks", f"{lat['processed']} / {lat['chunks']}", f"{zero['processed']} / {zero['chunks']}"),
        ("LLM calls", str(lat["llm_calls_total"]), str(zero["llm_calls_total"])),
        ("input / output tokens", f"{lat['input_tokens']} / {lat['output_tokens']}", f"{zero['input_tokens']} / {zero['output_tokens']}"),
        ("mean latency (s)", f"{lat['mean_latency_s']:.3f}", "0"),
        ("wall (s)", f"{lat['wall_s']:.2f}", f"{zero['wall_s']:.2f}"),
        ("ideal (s)", f"{lat['ideal_s']:.2f}", "-"),
        ("ratio wall/ideal", f"{lat['ratio']:.3f}", "-"),
        ("efficiency", f"{lat['efficiency']:.1%}", "-"),
        ("chunks/s", f"{lat['chunks_per_s']}", f"{zero['chunks_per_s']}"),
        ("docs/s", f"{lat['docs_per_s']}", f"{zero['docs_per_s']}"),
        ("CPU (s) / chunks per CPU-s", f"{lat['cpu_s']:.1f} / {lat['chunks_per_cpu_s']}", f"{zero['cpu_s']:.1f} / {zero['chunks_per_cpu_s']}"),
        ("commit batches", str(lat["commit_batches"]), str(zero["commit_batches"])),
        ("max loop lag (ms)", str(lat["loop_lag"]["max_ms"]), str(zero["loop_lag"]["max_ms"])),
        ("peak RSS (MiB)", f"{lat['peak_rss_mib']} (pre {lat['rss_before_index_mib']})", f"{zero['peak_rss_mib']} (pre {zero['rss_before_index_mib']})"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'latency ' + str(result['settings']['latency']) + ' s':>24}  {'zero latency':>24}")
    for name, a, b in rows:
        print(f"{name:{width}}  {a:>24}  {b:>24}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=None, help="first N passages (default: all 1,890)")
    parser.add_argument("--latency", type=float, default=0.2, help="mean seconds per LLM call (default 0.2)")
    parser.add_argument("--jitter", type=float, default=0.05, help="uniform +/- seconds around the latency (default 0.05)")
    parser.add_argument("--concurrency", type=int, default=8, help="IndexConfig.llm_concurrency (default 8)")
    parser.add_argument("--gleaning", type=int, default=0, help="gleaning passes per chunk (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the jitter RNG (default 0)")
    parser.add_argument("--dimension", type=int, default=384, help="HashEmbedder dimension (default 384)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    args = parser.parse_args(argv)
    if args.latency <= 0:
        parser.error("--latency must be > 0 (the zero-latency run is always made)")
    if args.jitter < 0 or args.jitter > args.latency:
        parser.error("--jitter must be between 0 and --latency")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = RunSettings(
        docs=args.docs, latency=args.latency, jitter=args.jitter, concurrency=args.concurrency,
        gleaning=args.gleaning, seed=args.seed, dimension=args.dimension,
    )
    result = {
        "benchmark": "index_latency",
        "command": [Path(sys.executable).name, *sys.argv],
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "settings": {
            **asdict(settings),
            "stores": "embedded defaults",
            "embedder": f"hash-{args.dimension}",
            "index_config": index_config(settings).model_dump(mode="json"),
        },
        "memory_measure": "peak RSS of the run's own process (resource.getrusage ru_maxrss)",
        "latency_run": run_isolated(settings, args.latency),
        "zero_latency_run": run_isolated(settings, 0.0),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print_table(result)
    print(f"\nreport: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
