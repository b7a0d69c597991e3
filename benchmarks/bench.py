"""ragkit and LightRAG side by side, in one run: retrieval quality, indexing
throughput, query latency, and ragkit's growth with the corpus.

    python benchmarks/bench.py            # everything (make bench)
    python benchmarks/bench.py --quick    # a few minutes: 10 questions and their 200 passages
    python benchmarks/bench.py --smoke    # every part on 3 questions, output checked (make bench-smoke, CI)
    python benchmarks/bench.py --questions PATH

Run it in ragkit's venv from the repository root. It creates LightRAG's own
venv (``benchmarks/setup_lightrag.sh``) unless ``--skip-setup``, runs every
measurement in a child process of its system's venv (``bench_ragkit.py`` and
``lightrag_worker.py``; peak memory is then each run's own), one after the
other, never two at once, writes ``benchmarks/results/<name>.json`` and
regenerates the report (``report.py``: ``docs/benchmarks.md`` and its plots;
``--quick`` writes ``benchmarks/results/bench-quick.md`` instead). ``--smoke``
runs every part for both systems on a tiny input, writes the JSON, the report
and its plots into its work dir (``--out-dir`` elsewhere; never over the
committed results) and fails naming what is missing (``smoke_problems``).
See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _postgres import postgres_scale_runs  # noqa: E402
from _shared import read_json, reference, squash, write_json  # noqa: E402

LIGHTRAG_VENV = HERE / ".venv-lightrag"
LR_PY = LIGHTRAG_VENV / "bin" / "python"
RK_PY = Path(sys.executable)


class Runner:
    def __init__(self, work: Path, log: Path, step_timeout: float | None = None) -> None:
        self.work = work
        self.log = log
        self.step_timeout = step_timeout
        self.steps: list[dict[str, Any]] = []

    def run(self, name: str, cmd: list[str], timeout: float | None = None) -> float:
        limit = "--scale-timeout" if timeout else "the smoke's step limit"
        timeout = timeout or self.step_timeout
        started = time.perf_counter()
        print(f"[bench] {name} ...", flush=True)
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"\n===== {name}: {' '.join(map(str, cmd))}\n")
            log.flush()
            proc = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                    env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()  # the child we started, by its own handle
                proc.wait()
                self.steps.append({"step": name, "seconds": round(time.perf_counter() - started, 1),
                                   "exit": "timeout"})
                raise SystemExit(f"stopped after the {timeout:.0f} s limit ({limit})") from None
        seconds = time.perf_counter() - started
        self.steps.append({"step": name, "seconds": round(seconds, 1), "exit": code})
        if code:
            tail = self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
            print("\n".join(["[bench] the log's last lines:", *tail]), file=sys.stderr, flush=True)
            raise SystemExit(f"[bench] {name} failed (exit {code}); see {self.log}")
        print(f"[bench] {name}: {seconds:.1f} s", flush=True)
        return seconds


SERVER_PORTS = {"RAGKIT_REDIS_PORT": "6479", "RAGKIT_BOLT_PORT": "7787", "RAGKIT_BOLT_REDIS_PORT": "6490"}
CHROMA_PORT = "8100"
"""The benchmark's own servers, on ports of their own so that they never meet CI's or a developer's."""


@contextlib.contextmanager
def bench_servers(work: Path):
    """Redis (KV, doc status), a Chroma server (vectors) and the Bolt server
    (graph) on loopback, started with the plugins' scripts and always stopped;
    yields the ``--backend-settings`` of the scale run on them."""
    env = {**os.environ, **SERVER_PORTS, "RAGKIT_REDIS_DIR": str(work / "redis"),
           "RAGKIT_BOLT_DIR": str(work / "bolt")}
    redis, bolt = ROOT / "plugins/ragkit-redis/scripts/redis-server", ROOT / "plugins/ragkit-neo4j/scripts/bolt-server"
    chroma = [str(RK_PY), str(ROOT / "plugins/ragkit-chroma/scripts/chroma-server")]
    commands = [([str(redis)], []), ([str(bolt)], []), (chroma, ["--port", CHROMA_PORT])]
    try:
        for cmd, extra in commands:
            subprocess.run([*cmd, "start", *extra], env=env, check=True, stdout=subprocess.DEVNULL)
        redis_url = f"redis://127.0.0.1:{SERVER_PORTS['RAGKIT_REDIS_PORT']}/0"
        yield [
            "--backend-settings", json.dumps({
                "kv": {"name": "redis", "options": {"url": redis_url}},
                "doc_status": {"name": "redis", "options": {"url": redis_url}},
                "vector": {"name": "chroma-http", "options": {"host": "127.0.0.1", "port": int(CHROMA_PORT)}},
                # The stand-in's index trims whitespace from ids, so the adapter does not index there
                # by default; graph keys are normalised names (never padded), so it is safe here and
                # spares a label scan per lookup, as a real Neo4j's constraint would.
                "graph": {"name": "neo4j", "options": {"uri": f"bolt://127.0.0.1:{SERVER_PORTS['RAGKIT_BOLT_PORT']}",
                                                       "indexes": "create"}},
            }),
        ]
    finally:
        for cmd, extra in reversed(commands):
            subprocess.run([*cmd, "stop", *extra], env=env, check=False, stdout=subprocess.DEVNULL)


def scale_runs(r: Runner, rk: list, inputs: Path, work: Path, factors: list[int], backend: str,
               settings: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One child process per factor; stops at the first that fails or runs out of time."""
    out_rows = []
    for factor in factors:
        out = work / f"rk_scale_{backend}_{factor}.json"
        cmd = rk + ["scale", "--inputs", inputs, "--out", out, "--factor", str(factor), "--backend", backend]
        try:
            r.run(f"scale x{factor}: ragkit, {backend} stores",
                  cmd + settings + ["--workspace", f"bench-x{factor}"] + budgets(args),
                  timeout=args.scale_timeout or None)
            out_rows.append(read_json(out))
        except SystemExit as exc:  # report what fitted; say what did not
            out_rows.append({"factor": factor, "backend": backend, "failed": str(exc)})
            break
    return out_rows


_BACKENDS = ["embedded", "servers", "postgres"]
_SCALES = {"embedded": "scales", "servers": "server_scales", "postgres": "postgres_scales"}


def updated(old: dict[str, Any], new: dict[str, Any], parts: set[str]) -> dict[str, Any]:
    """``old`` with the parts of ``new`` put in, and the re-run recorded."""
    out = dict(old)
    for part in ("quality", "throughput", "aliases", "ray"):
        if part in parts:
            out[part] = new[part]
    if "scale" in parts:
        out["scale"] = new["scale"]
    else:  # only the (backend, factor) rows re-run are replaced: `--scale-postgres 1` keeps x5 and x10
        again = {(x.get("backend", "embedded"), x["factor"]) for x in new.get("scale", [])}
        if again:
            kept = [x for x in old.get("scale", []) if (x.get("backend", "embedded"), x["factor"]) not in again]
            out["scale"] = sorted(kept + new["scale"], key=lambda x: (_BACKENDS.index(x.get("backend", "embedded")),
                                                                   x["factor"]))
    for backend in {x.get("backend", "embedded") for x in new.get("scale", [])}:
        field = _SCALES[backend]  # the factors of the table: a re-run may add one (x100)
        kept = set() if "scale" in parts else set(old.get("settings", {}).get(field, []))
        done = kept | set(new["settings"][field])
        out["settings"] = {**out.get("settings", old.get("settings", {})), field: sorted(done)}
    out["steps"] = old.get("steps", []) + new["steps"]
    out["reruns"] = old.get("reruns", []) + [{
        "parts": sorted(parts), "started_at": new["started_at"], "command": new["command"],
        "total_s": new["total_s"], "load_average_at_start": new["machine"].get("load_average_at_start"),
    }]
    return out


def machine() -> dict[str, Any]:
    def version(py: Path, code: str) -> str:
        try:
            return subprocess.run([str(py), "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpus": os.cpu_count(), "cpu": cpu, "memory": mem, "platform": platform.platform(),
        "python": platform.python_version(),
        "ragkit": version(RK_PY, "import ragkit; print(ragkit.__version__)"),
        "lightrag": version(LR_PY, "import lightrag; print(lightrag.__version__)"),
        "torch": version(LR_PY, "import torch; print(torch.__version__)"),
        "sentence_transformers": version(LR_PY, "import sentence_transformers as s; print(s.__version__)"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def budgets(args: argparse.Namespace) -> list[str]:
    return ["--top-k", str(args.top_k), "--chunk-top-k", str(args.chunk_top_k),
            "--max-entity-tokens", str(args.max_entity_tokens), "--max-relation-tokens",
            str(args.max_relation_tokens), "--max-total-tokens", str(args.max_total_tokens)]


def quick_inputs(inputs: Path, n_questions: int) -> None:
    """Keeps the first questions and only the passages they list (20 each)."""
    questions = read_json(inputs / "questions.json")[:n_questions]
    dev = {q["id"]: q for q in json.loads((_musique() / "questions_dev.json").read_text(encoding="utf-8"))}
    wanted = set()
    for q in questions:
        for p in dev.get(q["id"], {}).get("paragraphs", []):
            wanted.add(squash(p["title"] + "\n" + p["paragraph_text"]))
        wanted.update(squash(g) for g in q["gold"])
    replay = read_json(inputs / "replay.json")
    replay["passages"] = [p for p in replay["passages"] if squash(p["text"]) in wanted]
    write_json(inputs / "replay.json", replay)
    write_json(inputs / "questions.json", questions)


def _musique() -> Path:
    out = subprocess.run([str(RK_PY), "-c", "from ragkit.testing.replay import musique_dir; print(musique_dir())"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


SMOKE_QUESTIONS = 3
PLOTS = ["quality.png", "throughput.png", "latency.png", "scale.png"]


def smoke_problems(res: dict[str, Any], md: Path) -> list[str]:
    """What the smoke run's result and report lack: every part, both systems, every
    figure the report shows, as finite numbers in range. Empty when all is there."""
    problems: list[str] = []

    def num(where: str, x: dict, key: str, fraction: bool = False) -> None:
        """x[key] a finite number: in [0, 1] if a fraction, else above 0."""
        v = x.get(key)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not (ok and (0 <= v <= 1 if fraction else v > 0)):
            wanted = "a number in [0, 1]" if fraction else "a positive number"
            problems.append(f"{where}: {key} = {v!r}, wanted {wanted}")

    modes = ["naive", "local", "global", "hybrid", "mix"]
    variants = [f"{m}/similarity" for m in modes[1:]]
    for system, wanted in (("ragkit", modes + variants + ["ppr"] + [f"{m}/torch" for m in modes]), ("lightrag", modes)):
        scores = res.get("quality", {}).get(system, {}).get("scores", {})
        for m in wanted:
            if m not in scores:
                problems.append(f"quality: {system} has no mode {m!r}")
                continue
            for key in ("recall", "all_supporting", "recall@2", "recall@5"):
                num(f"quality {system} {m}", scores[m], key, fraction=True)
            for key in ("context_tokens_mean", "p50_ms", "p95_ms"):
                num(f"quality {system} {m}", scores[m], key)
        if scores and not any(s.get("recall") for s in scores.values()):
            problems.append(f"quality: {system} found no supporting passage in any mode")
    for key in ("latency", "zero_latency"):
        for system in ("ragkit", "lightrag", "ragkit_all"):
            x = res.get("throughput", {}).get(key, {}).get(system)
            if x is None:
                problems.append(f"throughput {key}: no {system} run")
                continue
            for field in ("wall_s", "llm_calls_total", "input_tokens", "output_tokens", "peak_rss_mib",
                          "chunks_per_s") + (("efficiency",) if key == "latency" else ()):
                num(f"throughput {key} {system}", x, field)
    aliases = res.get("aliases", {})
    for name in ("musique", "cjk"):
        num(f"aliases rules {name}", aliases.get("rules", {}).get(name, {}).get("all", {}), "precision", fraction=True)
    for run in ("off", "rules", "rules+check"):
        x = aliases.get("cost", {}).get("runs", {}).get(run, {})
        num(f"aliases cost {run}", x, "wall_s")
        num(f"aliases cost {run}", x, "llm_calls_total")
    ray_runs = res.get("ray", {}).get("runs", {})
    for run in ("in-process", "ray, 1 node", "ray, 2 nodes"):
        x = ray_runs.get(run)
        if x is None:
            problems.append(f"ray: no {run!r} run")
            continue
        num(f"ray {run}", x, "wall_s")
        if run != "in-process" and x.get("same_stores") is not True:
            problems.append(f"ray {run}: stores differ from the in-process run's: {x.get('store_differences')}")
    scale = {(x.get("backend", "embedded"), x.get("factor")): x for x in res.get("scale", [])}
    wanted = [("embedded", f) for f in res["settings"]["scales"]]
    wanted += [("servers", f) for f in res["settings"].get("server_scales", [])]
    wanted += [("postgres", f) for f in res["settings"].get("postgres_scales", [])]
    for backend, factor in wanted:
        x, what = scale.get((backend, factor)), f"scale {backend} x{factor}"
        if x is None or "failed" in x:
            problems.append(f"{what}: " + (x["failed"].removeprefix("[bench] ") if x else "no entry"))
            continue
        extra = {"embedded": ("disk_mib",), "postgres": ("disk_mib", "db_peak_pss_mib")}.get(backend, ())
        for field in ("docs", "index_s", "peak_rss_mib") + extra:
            num(what, x, field)
        for m in modes:
            num(f"{what} {m}", x.get("modes", {}).get(m, {}).get("latency", {}), "p50_ms")
    text = md.read_text(encoding="utf-8") if md.is_file() else ""
    if not text.strip():
        return problems + [f"report: {md} is missing or empty"]
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    problems += [f"report: {md.name} shows no {png}" for png in PLOTS if not any(i.endswith(png) for i in images)]
    for image in images:
        path = md.parent / image
        if not path.is_file() or not path.stat().st_size:
            problems.append(f"report: {md.name} shows {image}, but {path} is missing or empty")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="10 questions, their ~200 passages, small prefixes and scales")
    size.add_argument("--smoke", action="store_true",
                      help=f"every part on {SMOKE_QUESTIONS} questions and their ~60 passages, then check the output "
                           "and exit 1 naming what is missing (make bench-smoke; CI runs it)")
    p.add_argument("--questions", help="questions file (default: the MuSiQue dev questions)")
    p.add_argument("--name", help="results/<name>.json (default: bench, bench-quick or bench-smoke)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help="write <name>.json, <name>.md and its plots here (default: benchmarks/results/ and "
                        "docs/benchmarks.md; --smoke: its work dir)")
    p.add_argument("--skip-setup", action="store_true", help="do not (re)create LightRAG's venv")
    p.add_argument("--only", default="quality,throughput,aliases,ray,scale",
                   help="comma list of parts to run: quality, throughput, aliases (entity resolution), ray (the Ray "
                        "executor against the in-process one), scale "
                        "(embedded, servers and PostgreSQL), scale-embedded, scale-servers, scale-postgres")
    p.add_argument("--update", action="store_true",
                   help="replace only the parts run in the existing results/<name>.json (its other parts, "
                        "settings and start time kept; the report lists the re-run)")
    p.add_argument("--lightrag-batch", type=int, default=None,
                   help="passages per LightRAG document in the quality run (default 100; 1 = as shipped)")
    p.add_argument("--prefix", type=int, default=None, help="passages of the side-by-side throughput runs (default 300)")
    p.add_argument("--latency", type=float, default=None, help="simulated LLM latency, s (0.2; --smoke 0.05)")
    p.add_argument("--jitter", type=float, default=None, help="± around it, s (0.05; --smoke 0.01)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--gleaning", type=int, default=1, choices=[0, 1])
    p.add_argument("--scale", default=None, help="corpus multiples for the scale run (default 1,10,50)")
    p.add_argument("--scale-servers", default=None,
                   help="corpus multiples for the scale run on the server backends (default 1,2,5; quick, smoke: 1)")
    p.add_argument("--scale-postgres", default=None,
                   help="corpus multiples for the scale run on PostgreSQL, each after the embedded stores at the "
                        "same multiple (default 1,5,10; quick, smoke: 1)")
    p.add_argument("--scale-timeout", type=float, default=None,
                   help="seconds one scale factor may take before it is stopped and reported as such "
                        "(1800; --smoke 600; 0: none)")
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--chunk-top-k", type=int, default=20)
    p.add_argument("--max-entity-tokens", type=int, default=6000)
    p.add_argument("--max-relation-tokens", type=int, default=8000)
    p.add_argument("--max-total-tokens", type=int, default=30000)
    p.add_argument("--sweep", default="4000,8000,12000",
                   help="ragkit's quality run also queries every mode at these total budgets (issue 17)")
    p.add_argument("--no-report", action="store_true")
    args = p.parse_args(argv)
    size = "smoke" if args.smoke else "quick" if args.quick else "full"

    def pick(option: Any, full: Any, quick: Any, smoke: Any) -> Any:
        return option if option is not None else {"full": full, "quick": quick, "smoke": smoke}[size]

    name = args.name or pick(None, "bench", "bench-quick", "bench-smoke")
    batch = pick(args.lightrag_batch, 100, 20, 20)
    prefix = pick(args.prefix, 300, 100, 30)
    args.latency = pick(args.latency, 0.2, 0.2, 0.05)
    args.jitter = pick(args.jitter, 0.05, 0.05, 0.01)
    scales = [int(x) for x in pick(args.scale, "1,10,50", "1,3", "1,2").split(",") if x]
    server_scales = [int(x) for x in pick(args.scale_servers, "1,2,5", "1", "1").split(",") if x]
    postgres_scales = [int(x) for x in pick(args.scale_postgres, "1,5,10", "1", "1").split(",") if x]
    args.scale_timeout = pick(args.scale_timeout, 1800, 1800, 600)
    parts = set(args.only.split(","))
    started = time.perf_counter()

    if not args.skip_setup:
        t0 = time.perf_counter()
        subprocess.run(["bash", str(HERE / "setup_lightrag.sh"), str(LIGHTRAG_VENV)], check=True)
        print(f"[bench] LightRAG's venv ready: {time.perf_counter() - t0:.1f} s", flush=True)
    work = Path(tempfile.mkdtemp(prefix=f"ragkit-{name}-"))
    out_dir = args.out_dir or (work if args.smoke else None)
    inputs = work / "inputs"
    r = Runner(work, work / "bench.log", step_timeout=600 if args.smoke else None)
    print(f"[bench] work dir and full log: {work}", flush=True)
    prep = [RK_PY, HERE / "bench_ragkit.py", "prepare", "--inputs", inputs]
    r.run("prepare inputs", prep + (["--questions", args.questions] if args.questions else []))
    if args.quick or args.smoke:
        quick_inputs(inputs, SMOKE_QUESTIONS if args.smoke else 10)
    n_passages = len(read_json(inputs / "replay.json")["passages"])
    rk = [RK_PY, HERE / "bench_ragkit.py"]
    lr = [LR_PY, HERE / "lightrag_worker.py"]
    tk = ["--tiktoken-cache", work / "tiktoken"]
    result: dict[str, Any] = {
        "benchmark": "side_by_side", "name": name, "quick": args.quick, "smoke": args.smoke,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
        "settings": {
            "passages": n_passages, "questions": len(read_json(inputs / "questions.json")),
            "questions_file": args.questions or "MuSiQue dev (questions_dev.json)",
            "budgets": {"top_k": args.top_k, "chunk_top_k": args.chunk_top_k,
                        "max_entity_tokens": args.max_entity_tokens, "max_relation_tokens": args.max_relation_tokens,
                        "max_total_tokens": args.max_total_tokens},
            "lightrag_quality_batch": batch, "throughput_prefix": prefix, "latency_s": args.latency,
            "jitter_s": args.jitter, "concurrency": args.concurrency, "gleaning": args.gleaning, "scales": scales,
            "server_scales": server_scales, "postgres_scales": postgres_scales,
        },
    }

    if "quality" in parts:
        q = {}
        r.run(f"quality: LightRAG (MiniLM, {batch} passages per document)",
              lr + ["quality", "--inputs", inputs, "--out", work / "lr_quality.json", "--embedder", "minilm",
                    "--batch", str(batch)] + budgets(args) + tk)
        # ragkit again at LightRAG's measured context size per mode, and at fixed total budgets (issue 17)
        equal = {m: round(sum(x["context_tokens"] for x in d["questions"]) / len(d["questions"]))
                 for m, d in read_json(work / "lr_quality.json")["modes"].items() if d["questions"]}
        r.run("quality: ragkit (MiniLM)", rk + ["quality", "--inputs", inputs, "--out", work / "rk_quality.json",
                                                "--embedder", "minilm", "--variants", "--sweep", args.sweep,
                                                "--equal-tokens", json.dumps(equal)] + budgets(args))
        for system, raw in (("ragkit", "rk_quality.json"), ("lightrag", "lr_quality.json")):
            r.run(f"score {system}", rk + ["score", "--inputs", inputs, "--run-file", work / raw,
                                          "--out", work / f"{system}_scores.json"] + budgets(args))
            run = read_json(work / raw)
            q[system] = {
                "scores": read_json(work / f"{system}_scores.json"),
                **{k: v for k, v in run.items() if k != "modes"},
                "per_question": {m: [{"id": x["id"], "seconds": round(x["seconds"], 4), "chunks": len(x["chunks"]),
                                      "context_tokens": x["context_tokens"]} for x in d["questions"]]
                                 for m, d in run["modes"].items()},
            }
        result["quality"] = q

    if "throughput" in parts:
        t: dict[str, Any] = {"prefix": prefix}
        common = ["--concurrency", str(args.concurrency), "--gleaning", str(args.gleaning), "--jitter",
                  str(args.jitter), "--seed", "0", "--dimension", "384"]
        for lat in (args.latency, 0.0):
            key = "latency" if lat else "zero_latency"
            r.run(f"throughput {key}: ragkit, {prefix} passages",
                  rk + ["throughput", "--inputs", inputs, "--out", work / f"rk_{key}.json", "--docs", str(prefix),
                        "--latency", str(lat)] + common)
            r.run(f"throughput {key}: LightRAG, {prefix} passages (one document each, as shipped)",
                  lr + ["throughput", "--inputs", inputs, "--out", work / f"lr_{key}.json", "--docs", str(prefix),
                        "--latency", str(lat), "--embedder", "hash"] + common + tk)
            r.run(f"throughput {key}: ragkit, all {n_passages} passages",
                  rk + ["throughput", "--inputs", inputs, "--out", work / f"rk_{key}_all.json",
                        "--latency", str(lat)] + common)
            t[key] = {"ragkit": read_json(work / f"rk_{key}.json"), "lightrag": read_json(work / f"lr_{key}.json"),
                      "ragkit_all": read_json(work / f"rk_{key}_all.json")}
        result["throughput"] = t

    if "aliases" in parts:
        r.run("entity resolution: rules on the alias sets, indexing cost off / on / with the model check",
              [RK_PY, HERE / "bench_aliases.py", "--inputs", inputs, "--out", work / "rk_aliases.json",
               "--latency", str(args.latency), "--jitter", str(args.jitter), "--concurrency",
               str(args.concurrency)])
        result["aliases"] = read_json(work / "rk_aliases.json")

    if "ray" in parts:
        r.run(f"ray executor: {prefix} passages in-process, then on a local Ray cluster of 1 and 2 nodes",
              [RK_PY, HERE / "bench_ray.py", "--inputs", inputs, "--out", work / "rk_ray.json", "--docs", str(prefix),
               "--latency", str(args.latency), "--jitter", str(args.jitter), "--concurrency", str(args.concurrency)])
        result["ray"] = read_json(work / "rk_ray.json")

    if "scale" in parts or "scale-embedded" in parts:
        result["scale"] = scale_runs(r, rk, inputs, work, scales, "embedded", [], args)
    if "scale" in parts or "scale-servers" in parts:
        result.setdefault("scale", [])
        for factor in server_scales:
            # The embedded stores at the same factor just before: the ratios'
            # denominator, measured under the same load as the servers' run.
            ref = scale_runs(r, rk, inputs, work, [factor], "embedded", [], args)[0]
            # Fresh servers per factor: the Bolt stand-in can stop answering new
            # connections after an earlier process's driver closed (../shared/NOTES.md).
            with bench_servers(work) as backend_settings:
                rows = scale_runs(r, rk, inputs, work, [factor], "servers", backend_settings, args)
            if "failed" not in ref and "failed" not in rows[-1]:
                rows[-1]["reference"] = reference(ref)
            result["scale"] += rows
            if rows[-1].get("failed"):
                break
    if "scale" in parts or "scale-postgres" in parts:
        result.setdefault("scale", [])
        result["scale"] += postgres_scale_runs(r, scale_runs, rk, inputs, work, postgres_scales, args)

    result["steps"] = r.steps
    result["total_s"] = round(time.perf_counter() - started, 1)
    out = (out_dir or HERE / "results") / f"{name}.json"
    if args.update:
        result = updated(read_json(out), result, parts)
    write_json(out, result)
    print(f"[bench] wrote {out} ({result['total_s']:.0f} s in all)")
    md = out_dir / f"{name}.md" if out_dir else HERE / "results" / f"{name}.md" if args.quick else None
    if not args.no_report:
        report = [LR_PY, HERE / "report.py", out] + (["--md", md] if md else [])
        if args.quick and not out_dir:
            report += ["--no-plots"]
        subprocess.run([str(c) for c in report], check=True, cwd=ROOT)
    if args.smoke:
        problems = smoke_problems(result, md)
        if problems:
            print(f"[bench] smoke FAILED, {len(problems)} problem(s) in {out} and {md}:", file=sys.stderr)
            print("\n".join(f"  - {x}" for x in problems), file=sys.stderr)
            return 1
        print(f"[bench] smoke OK: every part for both systems, report and plots in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
