"""The Ray executor against the in-process one (issue 30, item 5), in ragkit's venv.

The first ``--docs`` MuSiQue passages, one file each, indexed by ``ragkit
index`` three times into fresh embedded stores: in-process (``--executor
local``), then ``--executor ray`` on a real local cluster of 1 node and of 2
nodes (``ragkit.testing.ray_cluster``: ``ray start``, one CPU per node). Every
run has the same LLM: the replayed extractions behind the simulated latency
(``latency`` + up to ``jitter`` s a call, derived from the prompt), built in the
process that answers (the model actors, for Ray), and the hash embedder.

Per run: wall time of the command (interpreter and cluster connection
included), the indexer's own seconds, LLM calls, the calls' mean latency (from
their logged start and end), efficiency (calls x mean latency /
``llm_concurrency`` over the indexer's seconds: 1.0 is the latency bound),
the peak RSS of the driver, the processes the calls ran in, and whether the
stores equal the in-process run's (``ragkit.testing.snapshot.differences``).

This machine has 2 cores: the nodes share them with the driver, so the runs
measure the executor's overhead and correctness, not a cluster's speed-up.

Run by ``bench.py --only ray``; alone::

    .venv/bin/python benchmarks/bench_ray.py --inputs DIR --out ray.json --docs 300
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import read_json, write_json  # noqa: E402

from ragkit.testing.ray_cluster import local_cluster  # noqa: E402
from ragkit.testing.snapshot import differences, folder_snapshot  # noqa: E402

RAGKIT = Path(sys.executable).with_name("ragkit")
HASH_DIMENSION = 64


def write_corpus(inputs: Path, folder: Path, docs: int) -> int:
    passages = [p["text"] for p in read_json(inputs / "replay.json")["passages"]][:docs]
    folder.mkdir(parents=True)
    for i, text in enumerate(passages):
        (folder / f"p{i:05d}.txt").write_text(text, encoding="utf-8")
    return len(passages)


def settings_file(root: Path, args: argparse.Namespace) -> Path:
    path = root / "ragkit.toml"
    path.write_text(
        f'working_dir = "{root / "data"}"\n[index]\nllm_concurrency = {args.concurrency}\n'
        f'[llm]\nname = "replay"\n[llm.options]\nlatency = {args.latency}\njitter = {args.jitter}\n'
        f'call_log = "{root / "calls.log"}"\n[embedder]\nname = "hash"\n',
        encoding="utf-8",
    )
    return path


def index_run(corpus: Path, root: Path, args: argparse.Namespace, *executor: str) -> dict[str, Any]:
    root.mkdir(parents=True)
    cmd = [str(RAGKIT), "--config", str(settings_file(root, args)), "index", str(corpus), "--json", *executor]
    env = {**os.environ, "RAGKIT_TEST_DOUBLES": "1"}
    started = time.perf_counter()
    with open(root / "stdout.json", "w") as out, open(root / "stderr.log", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"[bench] {' '.join(cmd)} failed ({proc.returncode}): "
                         f"{(root / 'stderr.log').read_text()[-2000:]}")
    report = read_json(root / "stdout.json")
    calls = call_times(root / "calls.log")
    mean = sum(calls.values()) / len(calls) if calls else 0.0
    llm_calls = sum(report["llm"]["calls"].values())
    ideal = llm_calls * mean / args.concurrency
    return {
        "wall_s": round(wall, 2), "index_s": report["seconds"], "processed": report["processed"],
        "failed": len(report["failed"]), "llm_calls_total": llm_calls, "mean_latency_s": round(mean, 4),
        "ideal_s": round(ideal, 2), "efficiency": round(ideal / report["seconds"], 3) if report["seconds"] else None,
        "driver_peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "answering_processes": len({pid for pid, _ in calls}),
        "entities": report["graph"]["entities"], "relations": report["graph"]["relations"],
    }


def call_times(log: Path) -> dict[tuple[int, str], float]:
    """(pid, cache key) -> seconds from start to end, from the call log."""
    started: dict[tuple[int, str], float] = {}
    out: dict[tuple[int, str], float] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        event, pid, _, key, at = line.split()
        if event == "start":
            started[(int(pid), key)] = float(at)
        elif (int(pid), key) in started:
            out[(int(pid), key)] = float(at) - started.pop((int(pid), key))
    return out


def snapshot(workdir: Path) -> dict:
    return asyncio.run(folder_snapshot(workdir, HASH_DIMENSION))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=Path, required=True, help="the harness's inputs folder (replay.json)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--docs", type=int, default=300, help="first N passages, one file each")
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--jitter", type=float, default=0.05)
    p.add_argument("--concurrency", type=int, default=8)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        work = Path(tmp)
        docs = write_corpus(args.inputs, work / "corpus", args.docs)
        runs = {"in-process": index_run(work / "corpus", work / "local", args, "--executor", "local")}
        reference = snapshot(work / "local" / "data")
        for nodes in (1, 2):
            with local_cluster(nodes=nodes) as cluster:
                name = f"ray, {nodes} node" + ("s" if nodes > 1 else "")
                root = work / f"ray{nodes}"
                runs[name] = index_run(work / "corpus", root, args, "--executor", "ray", "--address", cluster.address)
            runs[name]["store_differences"] = differences(snapshot(root / "data"), reference)
            runs[name]["same_stores"] = not runs[name]["store_differences"]
    base = runs["in-process"]
    for run in runs.values():
        run["wall_ratio"] = round(run["wall_s"] / base["wall_s"], 2)
    write_json(args.out, {"docs": docs, "latency_s": args.latency, "jitter_s": args.jitter,
                          "concurrency": args.concurrency, "cpus": os.cpu_count(), "runs": runs})
    print(f"[bench_ray] wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
