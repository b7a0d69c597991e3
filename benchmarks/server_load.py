"""Load on ``ragkit serve``: N clients query while a folder is ingested.

    python benchmarks/server_load.py [--docs 60] [--clients 8] [--seconds 60] [--port 0]

1. Starts the real server (``ragkit serve``, a subprocess, loopback, a temp
   working dir; MuSiQue passages, the replay LLM and the hash embedder, so the
   run needs no network and no model).
2. Uploads the passages (multipart, ``max_upload_files`` per request) and,
   while the writer ingests them, runs ``--clients`` concurrent clients that
   query (answer, context only) and list documents; each stops when the
   ingestion is done and it made ``--min-requests``, or at ``--seconds``.
   ``GET /health`` is polled from the load's own process and, for the
   server's figure, from a process of its own (``HealthProbe``).
3. Reports p50/p95 per route and the errors (the target is zero), then checks
   nothing was lost: the server's documents, chunks, entities and relations
   equal those of an offline ``ragkit index`` of the same files.
4. Server overhead over an in-process query (target: p50 + <= 3 ms), for
   ``/query`` and ``/query/context``: the same questions on the idle server,
   alternately (order switching every pair) over loopback HTTP (a keep-alive
   httpx client) and in-process (``RAG.aquery`` on the same workspace, as
   the key's principal, result serialised to JSON); p50/p95 of each and of
   the paired differences, and ``GET /health``, the loopback floor. Then the
   app alone, in this process (``create_app``, the pool's own RAG): straight
   through ASGI (the server's code only) and through httpx's ASGI transport
   (plus the client library), and the app's code alone (``aquery`` answering
   a stored result). The machine's load average before and after.

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


def _env(working_dir: Path, llm: str = "replay") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    # The replay LLM is a test double, registered only when asked for.
    return {**env, "RAGKIT_WORKING_DIR": str(working_dir), "RAGKIT_LLM": llm, "RAGKIT_EMBEDDER": "hash",
            "RAGKIT_TEST_DOUBLES": "1"}


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


class Load:
    def __init__(self, url: str, key: str, workspace: str) -> None:
        self.url, self.key, self.ws = url, key, workspace
        self.latency: dict[str, list[float]] = {}
        self.errors: list[str] = []
        self.timeouts: list[str] = []
        self.timeout = 60.0

    async def timed(self, c: httpx.AsyncClient, label: str, method: str, path: str, **kw) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            r = await c.request(method, path if path.startswith("/health") else f"/w/{self.ws}{path}", **kw)
        except httpx.TimeoutException:
            self.timeouts.append(label)
            # Counted in the percentiles too, at the time it was given up:
            # a route whose every request timed out must not show no figure.
            self.latency.setdefault(label, []).append(time.perf_counter() - started)
            return None
        except httpx.HTTPError as exc:
            self.errors.append(f"{label}: {type(exc).__name__}")
            return None
        self.latency.setdefault(label, []).append(time.perf_counter() - started)
        if r.status_code >= 400:
            self.errors.append(f"{label}: {r.status_code} {r.text[:200]}")
        return r

    async def health(self, ingesting: asyncio.Event, deadline: float, every: float = 0.2) -> None:
        """``GET /health`` every ``every`` seconds while the others run: the
        loop's own responsiveness (the route does no work)."""
        async with httpx.AsyncClient(base_url=self.url, timeout=self.timeout) as c:
            while time.monotonic() < deadline and ingesting.is_set():
                await self.timed(c, "GET /health", "GET", "/health")
                await asyncio.sleep(every)

    async def client(self, n: int, ingesting: asyncio.Event, deadline: float, min_requests: int) -> None:
        async with httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"Bearer {self.key}"},
                                     timeout=self.timeout) as c:
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


PROBE = r"""
import json, signal, sys, time, httpx
url, out, every = sys.argv[1], sys.argv[2], float(sys.argv[3])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
seconds, failures = [], 0
with httpx.Client(base_url=url, timeout=60) as c:
    while not stop:
        t = time.perf_counter()
        try:
            c.get("/health").raise_for_status()
        except httpx.HTTPError:
            failures += 1
        seconds.append(time.perf_counter() - t)
        time.sleep(every)
with open(out, "w") as fh:
    json.dump({"seconds": seconds, "failures": failures}, fh)
"""
PROBE_LABEL = "GET /health (own process)"


class HealthProbe:
    """``GET /health`` every ``every`` seconds from a process of its own. The
    load's clients share this process's loop and its CPU: a poll made here
    waits for their response handling too, so it measures the load generator
    as much as the server. Both figures are reported; the server's is this one."""

    def __init__(self, url: str, every: float = 0.2) -> None:
        fd, out = tempfile.mkstemp(prefix="health-probe-", suffix=".json")
        os.close(fd)  # the probe writes the file by name when it stops
        self.out = Path(out)
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, url, str(self.out), str(every)])

    def stop(self, load: Load) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)
        got = json.loads(self.out.read_text())
        self.out.unlink()
        load.latency[PROBE_LABEL] = got["seconds"]
        load.errors += [f"{PROBE_LABEL}: failed"] * got["failures"]


async def ingest_and_load(args, url: str, writer: str, reader: str, files: list[Path]) -> tuple[Load, dict]:
    load = Load(url, reader, args.workspace)
    load.timeout = args.timeout
    ingesting = asyncio.Event()
    ingesting.set()
    started = time.monotonic()
    deadline = started + args.seconds
    clients: list[asyncio.Task] = []
    probe = HealthProbe(url)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {writer}"}, timeout=120) as c:
        jobs = []
        for i in range(0, len(files), args.batch):
            batch = [("files", (p.name, p.read_bytes(), "text/plain")) for p in files[i:i + args.batch]]
            # A connection of its own: a kept-alive one that the server closed
            # while this loaded process was not scheduled fails the post (ReadError).
            r = await c.post(f"/w/{args.workspace}/documents/upload", files=batch, headers={"Connection": "close"})
            r.raise_for_status()
            jobs.append(r.json()["url"])
            if not clients:  # the first upload makes the workspace: reads before it are 404s
                clients = [asyncio.create_task(load.client(n, ingesting, deadline, args.min_requests))
                           for n in range(args.clients)]
                clients.append(asyncio.create_task(load.health(ingesting, deadline)))
        states = []
        while time.monotonic() < deadline + args.ingest_wait:
            states = [(await c.get(u)).json() for u in jobs]
            if all(s["state"] in ("done", "failed") for s in states):
                break
            await asyncio.sleep(0.2)
    ingest_seconds = time.monotonic() - started
    probe.stop(load)
    ingesting.clear()
    await asyncio.gather(*clients)
    return load, {"jobs": len(jobs), "states": [s["state"] for s in states], "ingest_seconds": round(ingest_seconds, 2),
                  "documents_done": sum(s["documents_done"] for s in states), "failed": sum(len(s["failed"]) for s in states)}


async def idle_load(args, url: str, reader: str) -> Load:
    """The same clients on the idle server (``--preload`` ingested), ``--min-requests``
    each, with ``GET /health`` polled meanwhile: the baseline of the 3x comparison."""
    load = Load(url, reader, args.workspace)
    load.timeout = args.timeout
    idle = asyncio.Event()  # never set: each client makes its --min-requests and stops
    polling = asyncio.Event()
    polling.set()
    deadline = time.monotonic() + args.seconds
    health = asyncio.create_task(load.health(polling, deadline))
    probe = HealthProbe(url)
    await asyncio.gather(*(load.client(n, idle, deadline, args.min_requests) for n in range(args.clients)))
    probe.stop(load)
    polling.clear()
    await health
    return load


def write_large(folder: Path, docs: int, chunks: int) -> list[Path]:
    """``docs`` text files of about ``chunks`` chunks each (default chunk size),
    MuSiQue passages concatenated (``benchmarks/loop_lag.py``)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from loop_lag import build_documents

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, doc in enumerate(build_documents(docs, chunks, 1200, 100)):
        path = folder / f"large-{i:03d}.txt"
        path.write_text(doc.content, encoding="utf-8")
        paths.append(path)
    return paths


def _routes(load: Load) -> dict:
    return {label: _stats(v) for label, v in sorted(load.latency.items())}


def _p99(values: list[float]) -> float:
    return round(_pct(values, 0.99), 2)


def large_report(load: Load, idle: Load) -> dict:
    """The acceptance figures: timeouts and errors under load, ``/health``
    p99, and each query route's p95 against the idle server's."""
    loaded, base = _routes(load), _routes(idle)
    ratios = {r: round(loaded[r]["p95_ms"] / base[r]["p95_ms"], 2) for r in loaded
              if r in base and r.startswith("POST /query") and base[r]["p95_ms"]}
    return {
        "routes_while_ingesting": loaded, "routes_idle": base,
        "timeouts": len(load.timeouts), "timeout_routes": sorted(set(load.timeouts)),
        "errors": len(load.errors), "error_samples": load.errors[:5],
        "health_p99_ms": _p99(load.latency.get(PROBE_LABEL, [])),
        "health_p99_idle_ms": _p99(idle.latency.get(PROBE_LABEL, [])),
        "health_p99_load_process_ms": _p99(load.latency.get("GET /health", [])),
        "query_p95_over_idle": ratios,
    }


def _graph(export: dict) -> dict:
    nodes = {n["id"]: n["properties"].get("description") for n in export["nodes"]}
    edges = {(e["source"], e["target"]): e["properties"].get("description") for e in export["edges"]}
    return {"entities": set(nodes), "relations": set(edges), "chunks": {c["id"] for c in export["chunks"]},
            "descriptions": set(nodes.items()) | set(edges.items())}


ROUTES = {"/query": {}, "/query/context": {"only_need_context": True}}


def _stats(values: list[float]) -> dict:
    return {"p50_ms": round(_pct(values, 0.5), 2), "p95_ms": round(_pct(values, 0.95), 2), "n": len(values)}


def _paired(times: dict[str, list[float]], served: str, base: str) -> dict:
    """The served time minus its in-process twin, pair by pair (the same
    question, the same moment's machine load), as p50 and p95."""
    return _stats([a - b for a, b in zip(times[served], times[base])])


async def _interleaved(times: dict, i: int, served, in_process) -> None:
    """One pair, the order alternating (GC and cache warmth fall on both alike)."""
    for label, call in ((("served", served), ("in_process", in_process)) if i % 2 else (("in_process", in_process), ("served", served))):
        t = time.perf_counter()
        await call()
        times[label].append(time.perf_counter() - t)


async def overhead(url: str, key: str, workspace: str, working_dir: Path, repeats: int) -> dict:
    """On the idle server, the same questions alternately over HTTP (one
    keep-alive httpx client) and in-process (``RAG.aquery`` on the same
    workspace, opened here, as the key's principal, as the server answers), so
    that the machine's load weighs on both alike; also ``GET /health``, the
    loopback floor (a round trip through the socket, uvicorn and the app with
    no work)."""
    os.environ.update(_env(working_dir))
    from ragkit.access import Principal
    from ragkit.rag import RAG
    from ragkit.schema import QueryParam
    from ragkit.settings import load_settings

    principal = Principal(user="bench")
    calls = [(q, m) for q in QUESTIONS for m in MODES]
    out: dict[str, dict] = {}
    settings = load_settings().settings.model_copy(update={"workspace": workspace})
    async with RAG(settings) as rag, httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        for route, extra in ROUTES.items():
            times: dict[str, list[float]] = {"served": [], "in_process": []}
            for q, m in calls:  # warm-up: caches, first open
                (await c.post(f"/w/{workspace}{route}", json={"question": q, "mode": m})).raise_for_status()
                await rag.aquery(q, QueryParam(mode=m, **extra), principal=principal)
            for i in range(repeats * len(calls)):
                q, m = calls[i % len(calls)]

                async def served() -> None:
                    (await c.post(f"/w/{workspace}{route}", json={"question": q, "mode": m})).raise_for_status()

                async def in_process() -> None:  # what the server does too, minus HTTP
                    (await rag.aquery(q, QueryParam(mode=m, **extra), principal=principal)).model_dump_json()

                await _interleaved(times, i, served, in_process)
            out[route] = times
        health = []
        for _ in range(repeats * len(calls)):
            t = time.perf_counter()
            (await c.get("/health")).raise_for_status()
            health.append(time.perf_counter() - t)
    return {"routes": out, "health": health}


async def _asgi_call(app, path: str, body: dict, key: str) -> bytes:
    """One request straight into the ASGI app (no client library, no socket):
    what the server's own code costs."""
    raw = json.dumps(body).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "state": {},
             "headers": [(b"host", b"localhost"), (b"authorization", f"Bearer {key}".encode()),
                         (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())],
             "client": ("127.0.0.1", 1), "server": ("localhost", 80)}
    messages = [{"type": "http.request", "body": raw, "more_body": False}]
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    if sent[0]["status"] != 200:
        raise RuntimeError(f"{path}: {sent[0]['status']}")
    return b"".join(m.get("body", b"") for m in sent[1:])


async def app_overhead(working_dir: Path, workspace: str, repeats: int) -> dict:
    """The app's own cost without the socket and a second process: the same
    FastAPI app (``create_app``, a key, the workspace pool), alternating with
    ``RAG.aquery`` on the pool's own RAG as the key's principal: called
    straight through ASGI (``asgi``: the server's code alone) and through
    httpx's ASGI transport (``httpx_asgi``: plus the client library's own
    cost of building and reading a request)."""
    os.environ.update(_env(working_dir))
    from ragkit.schema import QueryParam
    from ragkit.server.app import create_app
    from ragkit.server.context import principal_of
    from ragkit.server.keys import KeyStore
    from ragkit.settings import load_settings

    settings = load_settings().settings
    api_key, key = KeyStore(working_dir / "server_keys.sqlite").create([workspace], "bench", [], "read")
    principal = principal_of(api_key)
    app = create_app(settings)
    calls = [(q, m) for q in QUESTIONS for m in MODES]
    out: dict[str, dict] = {}
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
        transport=transport, base_url="http://localhost", headers={"Authorization": f"Bearer {key}"}
    ) as c:
        for route in ROUTES:
            for q, m in calls:
                (await c.post(f"/w/{workspace}{route}", json={"question": q, "mode": m})).raise_for_status()
        async with app.state.ragkit.pool.lease(workspace) as rag:
            for route, extra in ROUTES.items():
                for via in ("asgi", "httpx_asgi"):
                    times: dict[str, list[float]] = {"served": [], "in_process": []}
                    for i in range(repeats * len(calls)):
                        q, m = calls[i % len(calls)]
                        body = {"question": q, "mode": m}

                        async def served() -> None:
                            if via == "asgi":
                                await _asgi_call(app, f"/w/{workspace}{route}", body, key)
                            else:
                                (await c.post(f"/w/{workspace}{route}", json=body)).raise_for_status()

                        async def in_process() -> None:
                            (await rag.aquery(q, QueryParam(mode=m, **extra), principal=principal)).model_dump_json()

                        await _interleaved(times, i, served, in_process)
                    out[f"{route} {via}"] = times
            out["app_code"] = await _app_code(app, rag, workspace, key, repeats * len(calls) * 4)
    return out


async def _app_code(app, rag, workspace: str, key: str, n: int) -> dict:
    """The app's own code per request, without the query's time and its noise:
    ``/query`` through ASGI with this RAG's ``aquery`` answering a result
    computed once (routing, authentication, the lease, validation, the JSON
    encoding, metrics), and the JSON encoding alone, which an in-process
    caller that sends the result anywhere pays too."""
    body = {"question": QUESTIONS[0], "mode": "mix"}
    result = await rag.aquery(body["question"], mode="mix")

    async def stored(*args, **kwargs):
        return result

    times: dict[str, list[float]] = {"served": [], "json_only": []}
    rag.aquery = stored  # this instance only, for this loop
    try:
        for _ in range(n):
            t = time.perf_counter()
            await _asgi_call(app, f"/w/{workspace}/query", body, key)
            times["served"].append(time.perf_counter() - t)
            t = time.perf_counter()
            result.model_dump_json()
            times["json_only"].append(time.perf_counter() - t)
    finally:
        del rag.aquery
    return times


def _overhead_report(over: dict, asgi: dict, load_before: tuple, load_after: tuple) -> dict:
    loopback = {}
    for route, times in over["routes"].items():
        loopback[route] = {"http": _stats(times["served"]), "in_process": _stats(times["in_process"]),
                           "paired_overhead": _paired(times, "served", "in_process")}
    code = asgi.pop("app_code")
    app_only = {"app_code_per_request": {"served": _stats(code["served"]), "json_only": _stats(code["json_only"])}}
    for label, times in asgi.items():
        app_only[label] = {"served": _stats(times["served"]), "in_process": _stats(times["in_process"]),
                           "paired_overhead": _paired(times, "served", "in_process")}
    return {"target_ms": 3.0, "loopback_http": loopback, "health_floor": _stats(over["health"]), "app_only": app_only,
            "load_average_before": [round(x, 2) for x in load_before], "load_average_after": [round(x, 2) for x in load_after]}


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
    parser.add_argument("--timeout", type=float, default=120.0, help="client timeout per request (s)")
    parser.add_argument("--ingest-wait", type=float, default=900.0, help="seconds to wait for the jobs after --seconds")
    parser.add_argument("--large", action="store_true",
                        help="large documents (--chunks each, the offline LLM); the acceptance figures of issue 26, "
                             "no overhead part, no offline comparison")
    parser.add_argument("--chunks", type=int, default=7, help="--large: chunks per document")
    parser.add_argument("--preload", type=int, default=10,
                        help="--large: documents ingested before the idle baseline (the data both phases query)")
    parser.add_argument("--label", default=None, help="--large: key of the run in the results file")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    return run_large(args) if args.large else run(args)


def _start(args, working_dir: Path, llm: str, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = args.port or _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "ragkit", "serve", "--port", str(port)], env=_env(working_dir, llm),
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            if httpx.get(url + "/health").status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    return proc, url


def _keys(working_dir: Path, workspace: str) -> tuple[str, str]:
    from ragkit.server.keys import KeyStore

    store = KeyStore(working_dir / "server_keys.sqlite")
    return store.create([workspace], "bench", [], "write")[1], store.create([workspace], "bench", [], "read")[1]


async def preload(args, url: str, writer: str, files: list[Path]) -> float:
    """Ingest ``files`` with nobody querying and wait for the jobs: the data
    the idle baseline is measured on (an empty workspace answers faster)."""
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {writer}"}, timeout=120) as c:
        r = await c.post(f"/w/{args.workspace}/documents/upload",
                         files=[("files", (p.name, p.read_bytes(), "text/plain")) for p in files])
        r.raise_for_status()
        while (await c.get(r.json()["url"])).json()["state"] not in ("done", "failed"):
            await asyncio.sleep(0.5)
    return round(time.monotonic() - started, 1)


def run_large(args) -> int:
    """Issue 26's case: ``--preload`` large documents are ingested first; the
    clients query the idle server (the baseline), then query again while
    ``--docs`` more large documents are ingested (offline LLM)."""
    tmp = Path(tempfile.mkdtemp(prefix="ragkit-server-large-"))
    docs = args.docs if args.docs != 60 else 30
    every = write_large(tmp / "all", docs + args.preload, args.chunks)
    first, files = every[: args.preload], every[args.preload :]
    working_dir = tmp / "served"
    writer, reader = _keys(working_dir, args.workspace)
    load_before = os.getloadavg()
    proc, url = _start(args, working_dir, "offline", tmp / "server.log")
    try:
        preload_s = asyncio.run(preload(args, url, writer, first)) if first else 0.0
        idle = asyncio.run(idle_load(args, url, reader))
        load, ingest = asyncio.run(ingest_and_load(args, url, writer, reader, files))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    result = {
        "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "setup": {"docs": docs, "preload_docs": args.preload, "preload_s": preload_s, "chunks_per_doc": args.chunks,
                  "clients": args.clients, "seconds_bound": args.seconds,
                  "timeout_s": args.timeout, "llm": "offline", "embedder": "hash", "cpus": os.cpu_count(),
                  "load_average_before": [round(x, 2) for x in load_before],
                  "load_average_after": [round(x, 2) for x in os.getloadavg()],
                  "command": " ".join(["python", "benchmarks/server_load.py", *sys.argv[1:]])},
        "ingestion": ingest,
    } | large_report(load, idle)
    out = args.out or OUT.with_name("server_load_large.json")
    data = json.loads(out.read_text()) if out.exists() else {}
    data[args.label or "after"] = result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if not load.errors and not load.timeouts else 1


def run(args) -> int:
    from ragkit.testing.corpus import write_passages

    tmp = Path(tempfile.mkdtemp(prefix="ragkit-server-load-"))
    files = write_passages(tmp / "files", limit=args.docs)
    working_dir = tmp / "served"
    writer, reader = _keys(working_dir, args.workspace)
    proc, url = _start(args, working_dir, "replay", tmp / "server.log")
    try:
        load, ingest = asyncio.run(ingest_and_load(args, url, writer, reader, files))
        load_before = os.getloadavg()
        over = asyncio.run(overhead(url, reader, args.workspace, working_dir, args.repeats))
        served_export = httpx.get(f"{url}/w/{args.workspace}/graph/export", headers={"Authorization": f"Bearer {reader}"}, timeout=120).json()
        served_docs = httpx.get(f"{url}/w/{args.workspace}/documents", params={"limit": 1000},
                                headers={"Authorization": f"Bearer {reader}"}).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    asgi = asyncio.run(app_overhead(working_dir, args.workspace, args.repeats))
    load_after = os.getloadavg()
    offline = offline_index(tmp / "files", tmp / "offline")
    a, b = _graph(served_export), _graph(offline["export"])
    same = {k: a[k] == b[k] for k in a}
    same["documents"] = {d["id"] for d in served_docs["documents"]} == {d["id"] for d in offline["documents"]["documents"]}
    per_route = {label: {"n": len(v), "p50_ms": round(_pct(v, 0.5), 2), "p95_ms": round(_pct(v, 0.95), 2)}
                 for label, v in sorted(load.latency.items())}
    result = {
        "run": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "setup": {"docs": args.docs, "clients": args.clients, "seconds_bound": args.seconds, "batch": args.batch,
                  "llm": "replay", "embedder": "hash", "cpus": os.cpu_count()},
        "ingestion": ingest,
        "routes": per_route,
        "errors": len(load.errors) + len(load.timeouts),
        "error_samples": (load.errors + [f"{r}: timeout" for r in load.timeouts])[:5],
        "final_index_equals_offline": same,
        "counts": {k: len(v) for k, v in a.items()} | {"documents": len(served_docs["documents"])},
        "overhead": _overhead_report(over, asgi, load_before, load_after),
    }
    out = args.out or OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if not load.errors and not load.timeouts and all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
