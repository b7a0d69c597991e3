"""Indexing one large text file with the offline LLM: wall time and peak memory.

Generates a deterministic text file of ``--mb`` MiB (the MuSiQue passages,
title and text, shuffled with a fixed seed in every round and concatenated
round after round until the size is reached; read from the folder
``ragkit.testing.replay.musique_dir`` finds, i.e. ``$RAGKIT_MUSIQUE_DIR`` or
``../shared/data/musique``), then runs ``ragkit index FILE`` in a child
process on the embedded default stores with ``RAGKIT_LLM=offline`` and the
hash embedder, in a fresh temporary working dir. Reports wall time, the
child's peak RSS (``ru_maxrss`` from ``os.wait4``, so it is the child's own
figure), chunks, chunks/s, and how long the child went without a progress
event (the longest silence), as JSON in ``benchmarks/results/large_file.json``
(one entry per size, merged into what is there) and prints one line per size.

    python benchmarks/large_file.py                  # 5 and 50 MiB
    python benchmarks/large_file.py --mb 5 --label before --timeout 900

``--python`` runs another checkout's interpreter (e.g. main's venv, for a
"before" figure); that checkout's own ``ragkit`` package is what it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "large_file.json"
SEED = 15


def generate(path: Path, mib: float, seed: int = SEED) -> int:
    """Write the deterministic test file; returns its size in bytes."""
    from ragkit.testing.replay import load_musique

    passages = [f"{p['title']}\n{p['text']}\n\n" for p in load_musique()[0]]
    rng = random.Random(seed)
    target = int(mib * 1024 * 1024)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            order = list(range(len(passages)))
            rng.shuffle(order)
            for i in order:
                data = passages[i]
                size = len(data.encode("utf-8"))
                if written + size > target:
                    break
                out.write(data)
                written += size
            else:
                continue
            break
    return written


def run_child(python: str, cwd: Path, file: Path, timeout: float) -> dict:
    """``ragkit index FILE`` in a child; wall time, its peak RSS and progress gaps."""
    with tempfile.TemporaryDirectory(prefix="ragkit-large-") as tmp:
        env = {
            **os.environ,
            "RAGKIT_WORKING_DIR": str(Path(tmp) / "data"),
            "RAGKIT_LLM": "offline",
            "RAGKIT_EMBEDDER": "hash",
            "RAGKIT_PROGRESS": "plain",  # progress lines without a terminal (main before issue 15 ignores it)
            "PYTHONUNBUFFERED": "1",
        }
        code = "import sys; from ragkit.cli.main import main; sys.exit(main(sys.argv[1:]))"
        started = time.perf_counter()
        proc = subprocess.Popen(
            [python, "-c", code, "index", "--json", str(file)], cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        events: list[float] = [started]
        stderr_lines: list[str] = []
        import threading

        def read_stderr() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                events.append(time.perf_counter())
                stderr_lines.append(line.rstrip())
                print(line.rstrip(), file=sys.stderr, flush=True)  # so a long run can be watched

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        stdout = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        wall = time.perf_counter() - started
        reader.join(5)
        proc.returncode = os.waitstatus_to_exitcode(status)
        stores_rss = _stores_rss(python, cwd, env) if proc.returncode == 0 else None
    events.append(started + wall)
    peak_kib = usage.ru_maxrss
    out: dict = {
        "exit": proc.returncode,
        "timed_out": proc.returncode == -9,
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mib": round(peak_kib / (1024 * 1024 if sys.platform == "darwin" else 1024), 1),
        "stores_rss_mib": stores_rss,
        "progress_lines": len(stderr_lines),
        "longest_silence_s": round(max(b - a for a, b in zip(events, events[1:])), 1),
        "last_progress": stderr_lines[-1][-200:] if stderr_lines else "",
    }
    try:
        report = json.loads(stdout)
        out.update(
            chunks=report.get("chunks"), processed=report.get("processed"), failed=report.get("failed"),
            graph=report.get("graph"), llm_calls=(report.get("llm") or {}).get("calls"),
        )
    except json.JSONDecodeError:
        out["stdout_tail"] = stdout[-500:]
    if out.get("chunks") and out["exit"] == 0:
        out["chunks_per_s"] = round(out["chunks"] / wall, 1)
    return out


_OPEN_STORES = """
import asyncio, resource, sys
from ragkit.backends import build_stores
from ragkit.settings import load_settings

async def main():
    stores = build_stores(load_settings().settings, 64)
    await stores.open()
    await stores.graph.node_count()
    await stores.close()

asyncio.run(main())
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _stores_rss(python: str, cwd: Path, env: dict) -> float | None:
    """Peak RSS of a process that only opens and closes the indexed workspace:
    what the embedded stores hold in memory (the whole graph and every vector),
    to set against the indexing run's peak."""
    proc = subprocess.run([python, "-c", _OPEN_STORES], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    kib = int(proc.stdout.split()[-1])
    return round(kib / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, nargs="+", default=[5, 50], help="file sizes in MiB")
    parser.add_argument("--label", default="after", help="key of this run in the JSON (e.g. before/after)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the checkout to measure")
    parser.add_argument("--cwd", type=Path, default=REPO, help="that checkout's root")
    parser.add_argument("--timeout", type=float, default=3600, help="kill the child after this many seconds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    with tempfile.TemporaryDirectory(prefix="ragkit-large-input-") as tmp:
        for mib in args.mb:
            file = Path(tmp) / f"musique-{mib:g}mib.txt"
            size = generate(file, mib)
            run = run_child(args.python, args.cwd, file, args.timeout)
            run.update(
                file_bytes=size, seed=SEED, label=args.label, load_avg=os.getloadavg()[0],
                machine=f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
                command=" ".join([Path(sys.executable).name, *sys.argv]),
                at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            results.setdefault(args.label, {})[f"{mib:g}MiB"] = run
            print(
                f"{args.label} {mib:g} MiB: exit {run['exit']}, {run['wall_s']} s, peak RSS {run['peak_rss_mib']} MiB, "
                f"{run.get('chunks')} chunks, {run.get('chunks_per_s')} chunks/s, "
                f"longest silence {run['longest_silence_s']} s, stores alone {run.get('stores_rss_mib')} MiB",
                flush=True,
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
