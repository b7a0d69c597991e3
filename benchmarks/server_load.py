"""Load on ``ragkit serve``: N clients query while a folder is ingested.

    python benchmarks/server_load.py [--docs 60] [--clients 8] [--seconds 60] [--port 0]

1. Starts the real server (``ragkit serve``, a subprocess, loopback, a temp
   working dir; MuSiQue passages, the replay LLM and the hash embedder, so the
   run needs no network and no model).
2. Uploads the passages (multipart, ``max_upload_files`` per request) and,
   while the writer ingests them, runs ``--clients`` concurrent clients that
   query (answer, context only) and list documents; each stops when the
   ingestion is done and it made ``--min-requests``, or at ``--seconds``.
3. Reports p50/p95 per route and the errors (the target is zero), then checks
   nothing was lost: the server's documents, chunks, entities and relations
   equal those of an offline ``ragkit index`` of the same files.
4. Server overhead: the same questions on the idle server, alternately over
   HTTP and in-process (``RAG.aquery`` on the same workspace); p50 difference
   (target <= 3 ms), and ``GET /health`` as the HTTP floor; then the app
   alone (``create_app`` through httpx's ASGI transport, no socket, one
   process) against ``RAG.aquery`` on the same RAG, the part that is ragkit's.

Writes ``benchmarks/results/server_load.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "server_load.json"
QUESTIONS = [
    "Who founded the company?", "Where was the album recorded?", "When was the city founded?",
    "Which river flows through the capital?", "Who directed the film?", "What is the population of the town?",
]
MODES = ["mix", "local", "naive"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(working_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    return {**env, "RAGKIT_WORKING_DIR": str(working_dir), "RAGKIT_LLM": "replay", "RAGKIT_EMBEDDER": "hash"}


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


class Load:
    def __init__(self, url: str, key: str, workspace: str) -> None:
        self.url, self.key, self.ws = url, key, workspace
        self.latency: dict[str, list[float]] = {}
        self.errors: list[str] = []

    async def timed(self, c: httpx.AsyncClient, label: str, method: str, path: str, **kw) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            r = await c.request(method, f"/w/{self.ws}{path}", **kw)
        except httpx.HTTPError as exc:
            self.errors.append(f"{label}: {type(exc).__name__}")
            return None
        self.latency.setdefault(label, []).append(time.perf_counter() - started)
        if r.status_code >= 400:
            self.errors.append(f"{label}: {r.status_code} {r.text[:200]}")
        return r

    async def client(self, n: int, ingesting: asyncio.Event, deadline: float, min_requests: int) -> None:
        async with httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60) as c:
            i = 0
            while time.monotonic() < deadline and (ingesting.is_set() or i < min_requests):
                q = QUESTIONS[(n + i) % len(QUESTIONS)]
                mode = MODES[(n + i) % len(MODES)]
                kind = i % 3
                if kind == 0:
                    await self.timed(c, f"POST /query ({mode})", "POST", "/query", json={"question": q, "mode": mode})
                elif kind == 1:
                    await self.timed(c, "POST /query/context", "POST", "/query/context", json={"question": q, "mode": "mix"})
                else:
                    await self.timed(c, "GET /documents", "GET", "/documents", params={"limit": 50})
                i += 1


async def ingest_and_load(args, url: str, writer: str, reader: str, files: list[Path]) -> tuple[Load, dict]:
    load = Load(url, reader, args.workspace)
    ingesting = asyncio.Event()
    ingesting.set()
    started = time.monotonic()
    deadline = started + args.seconds
    clients = [asyncio.create_task(load.client(n, ingesting, deadline, args.min_requests)) for n in range(args.clients)]
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {writer}"}, timeout=120) as c:
        jobs = []
        for i in range(0, len(files), args.batch):
            batch = [("files", (p.name, p.read_bytes(), "text/plain")) for p in files[i:i + args.batch]]
            r = await c.post(f"/w/{args.workspace}/documents/upload", files=batch)
            r.raise_for_status()
            jobs.append(r.json()["url"])
        states = []
        while time.monotonic() < deadline + 600:
            states = [(await c.get(u)).json() for u in jobs]
            if all(s["state"] in ("done", "failed") for s in states):
                break
            await asyncio.sleep(0.2)
    ingest_seconds = time.monotonic() - started
    ingesting.clear()
    await asyncio.gather(*clients)
    return load, {"jobs": len(jobs), "states": [s["state"] for s in states], "ingest_seconds": round(ingest_seconds, 2),
                  "documents_done": sum(s["documents_done"] for s in states), "failed": sum(len(s["failed"]) for s in states)}


def _graph(export: dict) -> dict:
    nodes = {n["id"]: n["properties"].get("description") for n in export["nodes"]}
    edges = {(e["source"], e["target"]): e["properties"].get("description") for e in export["edges"]}
    return {"entities": set(nodes), "relations": set(edges), "chunks": {c["id"] for c in export["chunks"]},
            "descriptions": set(nodes.items()) | set(edges.items())}


async def overhead(url: str, key: str, workspace: str, working_dir: Path, repeats: int) -> dict:
    """On the idle server, the same questions alternately over HTTP and
    in-process (``RAG.aquery`` on the same workspace, opened here), so that the
    machine's load weighs on both alike; also ``GET /health``, the HTTP floor."""
    os.environ.update(_env(working_dir))
    from ragkit.rag import RAG
    from ragkit.settings import load_settings

    calls = [(q, m) for q in QUESTIONS for m in MODES]
    times: dict[str, list[float]] = {"http": [], "in_process": [], "health": []}
    settings = load_settings().settings.model_copy(update={"workspace": workspace})
    async with RAG(settings) as rag, httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        for q, m in calls:  # warm-up: caches, first open
            await c.post(f"/w/{workspace}/query", json={"question": q, "mode": m})
            await rag.aquery(q, mode=m)
        for _ in range(repeats):
            for q, m in calls:
                t = time.perf_counter()
                (await rag.aquery(q, mode=m)).model_dump_json()  # what the server does too, minus HTTP
                times["in_process"].append(time.perf_counter() - t)
                t = time.perf_counter()
                r = await c.post(f"/w/{workspace}/query", json={"question": q, "mode": m})
                times["http"].append(time.perf_counter() - t)
                r.raise_for_status()
                t = time.perf_counter()
                await c.get("/health")
                times["health"].append(time.perf_counter() - t)
    return times


async def app_overhead(working_dir: Path, workspace: str, repeats: int) -> dict:
    """The app's own cost without the socket and a second process: the same
    FastAPI app (``create_app``, a key, the workspace pool) through httpx's
    ASGI transport, alternating with ``RAG.aquery`` on the pool's own RAG."""
    os.environ.update(_env(working_dir))
    from ragkit.server.app import create_app
    from ragkit.server.keys import KeyStore
    from ragkit.settings import load_settings

    settings = load_settings().settings
    key = KeyStore(working_dir / "server_keys.sqlite").create([workspace], "bench", [], "read")[1]
    app = create_app(settings)
    calls = [(q, m) for q in QUESTIONS for m in MODES]
    times: dict[str, list[float]] = {"asgi": [], "in_process": []}
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
        transport=transport, base_url="http://bench", headers={"Authorization": f"Bearer {key}"}
    ) as c:
        for q, m in calls:
            (await c.post(f"/w/{workspace}/query", json={"question": q, "mode": m})).raise_for_status()
        async with app.state.ragkit.pool.lease(workspace) as rag:
            for _ in range(repeats):
                for q, m in calls:
                    t = time.perf_counter()
                    (await rag.aquery(q, mode=m)).model_dump_json()
                    times["in_process"].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    (await c.post(f"/w/{workspace}/query", json={"question": q, "mode": m})).raise_for_status()
                    times["asgi"].append(time.perf_counter() - t)
    return times


def offline_index(files_dir: Path, working_dir: Path) -> dict:
    env = _env(working_dir)
    subprocess.run([sys.executable, "-m", "ragkit", "index", str(files_dir)], env=env, check=True, capture_output=True)
    out = working_dir / "export.json"
    subprocess.run([sys.executable, "-m", "ragkit", "export", str(out)], env=env, check=True, capture_output=True)
    docs = subprocess.run([sys.executable, "-m", "ragkit", "documents", "--json", "--limit", "1000"], env=env,
                          check=True, capture_output=True, text=True)
    return {"export": json.loads(out.read_text()), "documents": json.loads(docs.stdout)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0, help="bound on the loaded phase")
    parser.add_argument("--min-requests", type=int, default=20, help="per client, even after the ingestion ended")
    parser.add_argument("--batch", type=int, default=20, help="files per upload request")
    parser.add_argument("--repeats", type=int, default=5, help="overhead: rounds of the question set")
    parser.add_argument("--port", type=int, default=0, help="0: a free loopback port")
    parser.add_argument("--workspace", default="bench")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    from ragkit.server.keys import KeyStore
    from ragkit.testing.corpus import write_passages

    tmp = Path(tempfile.mkdtemp(prefix="ragkit-server-load-"))
    files = write_passages(tmp / "files", limit=args.docs)
    working_dir = tmp / "served"
    store = KeyStore(working_dir / "server_keys.sqlite")
    writer = store.create([args.workspace], "bench", [], "write")[1]
    reader = store.create([args.workspace], "bench", [], "read")[1]
    port = args.port or _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "ragkit", "serve", "--port", str(port)], env=_env(working_dir),
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        load, ingest = asyncio.run(ingest_and_load(args, url, writer, reader, files))
        over = asyncio.run(overhead(url, reader, args.workspace, working_dir, args.repeats))
        served_export = httpx.get(f"{url}/w/{args.workspace}/graph/export", headers={"Authorization": f"Bearer {reader}"}, timeout=120).json()
        served_docs = httpx.get(f"{url}/w/{args.workspace}/documents", params={"limit": 1000},
                                headers={"Authorization": f"Bearer {reader}"}).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    asgi = asyncio.run(app_overhead(working_dir, args.workspace, args.repeats))
    offline = offline_index(tmp / "files", tmp / "offline")
    a, b = _graph(served_export), _graph(offline["export"])
    same = {k: a[k] == b[k] for k in a}
    same["documents"] = {d["id"] for d in served_docs["documents"]} == {d["id"] for d in offline["documents"]["documents"]}
    per_route = {label: {"n": len(v), "p50_ms": round(_pct(v, 0.5), 2), "p95_ms": round(_pct(v, 0.95), 2)}
                 for label, v in sorted(load.latency.items())}
    http50, inproc50 = _pct(over["http"], 0.5), _pct(over["in_process"], 0.5)
    paired = [h - i for h, i in zip(over["http"], over["in_process"])]
    result = {
        "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "setup": {"docs": args.docs, "clients": args.clients, "seconds_bound": args.seconds, "batch": args.batch,
                  "llm": "replay", "embedder": "hash", "cpus": os.cpu_count()},
        "ingestion": ingest,
        "routes": per_route,
        "errors": len(load.errors),
        "error_samples": load.errors[:5],
        "final_index_equals_offline": same,
        "counts": {k: len(v) for k, v in a.items()} | {"documents": len(served_docs["documents"])},
        "overhead": {"http_p50_ms": round(http50, 2), "in_process_p50_ms": round(inproc50, 2),
                     "overhead_p50_ms": round(http50 - inproc50, 2), "paired_difference_p50_ms": round(_pct(paired, 0.5), 2),
                     "health_p50_ms": round(_pct(over["health"], 0.5), 2), "target_ms": 3.0, "samples": len(paired),
                     "app_only": {"asgi_p50_ms": round(_pct(asgi["asgi"], 0.5), 2),
                                  "in_process_p50_ms": round(_pct(asgi["in_process"], 0.5), 2),
                                  "overhead_p50_ms": round(_pct(asgi["asgi"], 0.5) - _pct(asgi["in_process"], 0.5), 2)},
                     "load_average": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if not load.errors and all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
