"""Startup cost of the CLI: wall and CPU time of ``ragkit status`` and
``ragkit query --context-only`` with the ``hash`` and the
``sentence-transformers`` embedders, for this checkout and (``--base``)
another one, e.g. the commit before a change.

    python benchmarks/startup.py [--runs 5] [--base /tmp/base-worktree] [--out FILE]

Each embedder gets its own working dir, indexed once from examples/corpus with
this checkout's code and the offline LLM (the store files read the same for
both checkouts). Every command then runs ``--runs`` times in a fresh
``python -m ragkit`` process, with ``PYTHONPATH`` set to the checkout and its
plugins, the runs of all (checkout, embedder, command) interleaved so that a
busy machine disturbs them alike. Reported per row: the median and the range
of wall seconds, and the median CPU seconds (user + system of the child,
which load on a shared machine disturbs much less), and which model libraries
(torch, sentence_transformers, onnxruntime) the process imported. Writes a
JSON report (default ``benchmarks/results/startup.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EMBEDDERS = ("hash", "sentence-transformers")
QUESTION = "Who leads the project whose supplier's delivery slipped?"
COMMANDS = {"status": ["status"], "query --context-only": ["query", QUESTION, "--context-only", "--mode", "mix"]}
HEAVY = ("torch", "sentence_transformers", "onnxruntime")
PROBE = (
    "import atexit, json, runpy, sys\n"
    f"atexit.register(lambda: print('HEAVY ' + json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr))\n"
    "sys.argv = ['ragkit', *sys.argv[1:]]\n"
    "runpy.run_module('ragkit', run_name='__main__')\n"
)


def env_for(code: Path, working_dir: Path, embedder: str) -> dict[str, str]:
    paths = [str(code), *(str(p) for p in sorted((code / "plugins").iterdir()) if p.is_dir())]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") and k != "PYTHONPATH"}
    return {**env, "PYTHONPATH": os.pathsep.join(paths), "RAGKIT_WORKING_DIR": str(working_dir),
            "RAGKIT_EMBEDDER": embedder}


def run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, list[str]]:
    """(wall seconds, CPU seconds of the child, model libraries it imported)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"ragkit {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    heavy = next((json.loads(x[6:]) for x in out.stderr.splitlines() if x.startswith("HEAVY ")), [])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, heavy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--base", type=Path, help="another checkout to measure (e.g. a worktree of the base commit)")
    parser.add_argument("--base-label", default="before")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json")
    args = parser.parse_args(argv)
    checkouts = {**({args.base_label: args.base.resolve()} if args.base else {}), "after": ROOT}
    scratch = Path(tempfile.mkdtemp(prefix="ragkit-startup-"))
    dirs = {}
    for embedder in EMBEDDERS:
        dirs[embedder] = scratch / embedder
        started = time.perf_counter()
        run(["index", str(ROOT / "examples" / "corpus")], env_for(ROOT, dirs[embedder], embedder), scratch)
        print(f"indexed examples/corpus with {embedder} in {time.perf_counter() - started:.1f} s", flush=True)
    rows = [(label, embedder, name) for label in checkouts for embedder in EMBEDDERS for name in COMMANDS]
    samples: dict[tuple, list[tuple[float, float, list[str]]]] = {row: [] for row in rows}
    for _ in range(args.runs):
        for label, embedder, name in rows:
            env = env_for(checkouts[label], dirs[embedder], embedder)
            samples[label, embedder, name].append(run(COMMANDS[name], env, scratch))
    results = []
    for (label, embedder, name), got in samples.items():
        walls, cpus = [w for w, _, _ in got], [c for _, c, _ in got]
        results.append({"code": label, "embedder": embedder, "command": name, "runs": len(got),
                        "wall_median_s": round(statistics.median(walls), 3), "wall_min_s": round(min(walls), 3),
                        "wall_max_s": round(max(walls), 3), "cpu_median_s": round(statistics.median(cpus), 3),
                        "imported": sorted({m for _, _, heavy in got for m in heavy})})
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "machine": {"python": platform.python_version(), "platform": platform.platform(),
                          "cpus": os.cpu_count(), "load_average_1_5_15": os.getloadavg()},
              "checkouts": {label: _commit(path) for label, path in checkouts.items()},
              "runs": args.runs, "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'code':8} {'embedder':22} {'command':20} {'wall s (median, min-max)':>26} {'CPU s':>7}  imported")
    for r in results:
        wall = f"{r['wall_median_s']:.2f} ({r['wall_min_s']:.2f}-{r['wall_max_s']:.2f})"
        print(f"{r['code']:8} {r['embedder']:22} {r['command']:20} {wall:>26} {r['cpu_median_s']:7.2f}  "
              f"{', '.join(r['imported']) or '-'}")
    return 0


def _commit(path: Path) -> str:
    out = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain"], capture_output=True, text=True)
    return out.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


if __name__ == "__main__":
    raise SystemExit(main())
