"""What the chat endpoints add to a query: in-process ``RAG.aquery`` against
``POST /v1/chat/completions`` and ``POST /api/chat`` (not streamed) on loopback.

    python benchmarks/chat_overhead.py [--requests 200] [--mode mix] [--out FILE]

One workspace indexed from examples/corpus/en (offline LLM, hash embedder),
served by uvicorn in a child process; the in-process side queries its own
copy of it. Each side asks the same question the same way (the answer is
cached after the first call, so the LLM costs nothing and what is left is
retrieval plus, over HTTP, the route: auth dependency, body validation, JSON,
the references block, the client and the socket). Requests are sequential and
interleaved (in-process, OpenAI, Ollama, again), over one keep-alive httpx
connection. The routes are also timed through ``httpx.ASGITransport`` in the
measuring process (no socket, no second process): what the route itself adds. Writes a
JSON report (default ``benchmarks/results/chat_overhead.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI, Header, HTTPException

from ragkit.offline import OfflineLLM
from ragkit.rag import RAG
from ragkit.server.chat import ollama_router, openai_router
from ragkit.server.chat.turns import Turns
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Who leads the project whose supplier's delivery slipped?"
KEY = "bench-key-0123456789"


@dataclass
class Ctx:
    rag: RAG
    principal: None = None


def make_rag(working_dir: Path) -> RAG:
    return RAG(Settings(working_dir=working_dir), llm=OfflineLLM(), embedder=HashEmbedder({"dimension": 256}))


def build_app(rag: RAG) -> FastAPI:
    async def context(authorization: str | None = Header(default=None)) -> Ctx:
        if authorization != f"Bearer {KEY}":
            raise HTTPException(401, "missing or wrong key")
        return Ctx(rag)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await rag.aclose()

    app = FastAPI(lifespan=lifespan)
    app.include_router(ollama_router(context))
    app.include_router(openai_router(context))
    return app


def serve(working_dir: Path) -> None:
    """The server process: prints its port, serves until stdin closes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(build_app(make_rag(working_dir)), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    print(sock.getsockname()[1], flush=True)
    sys.stdin.read()
    server.should_exit = True
    thread.join(30)


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
            "mean_ms": round(statistics.fmean(ms), 3)}


async def measure(working_dir: Path, url: str, mode: str, requests: int) -> dict[str, list[float]]:
    """Interleaved, so that the machine's load drifts alike for every side."""
    param = Turns(question=QUESTION, mode=mode).param(stream=False)  # what the routes ask
    messages = [{"role": "user", "content": QUESTION}]
    routes = {
        "POST /v1/chat/completions": ("/v1/chat/completions", {"model": f"ragkit:{mode}", "messages": messages}),
        "POST /api/chat": ("/api/chat", {"model": f"ragkit:{mode}", "messages": messages, "stream": False}),
    }
    times: dict[str, list[float]] = {"in-process aquery": []}
    auth = {"Authorization": f"Bearer {KEY}"}
    async with make_rag(working_dir) as rag, \
            httpx.AsyncClient(base_url=url, headers=auth, timeout=60) as loopback, \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(rag)), base_url="http://asgi",
                              headers=auth, timeout=60) as asgi:
        for i in range(requests + 5):  # the first 5 warm up (open the stores, fill the answer cache)
            started = time.perf_counter()
            await rag.aquery(QUESTION, param, principal=None)
            took = {"in-process aquery": time.perf_counter() - started}
            for client, where in ((asgi, " (in-process ASGI)"), (loopback, " (loopback HTTP)")):
                for name, (path, body) in routes.items():
                    started = time.perf_counter()
                    (await client.post(path, json=body)).raise_for_status()
                    took[name + where] = time.perf_counter() - started
            if i >= 5:
                for name, seconds in took.items():
                    times.setdefault(name, []).append(seconds)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--mode", default="mix")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "chat_overhead.json"))
    parser.add_argument("--serve", metavar="WORKING_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(Path(args.serve))
        return 0

    working_dir = Path(tempfile.mkdtemp(prefix="ragkit-chat-bench-"))

    async def index() -> None:
        async with make_rag(working_dir) as rag:
            await rag.ainsert(paths=[ROOT / "examples" / "corpus" / "en"])

    asyncio.run(index())
    mine = working_dir.with_name(working_dir.name + "-in-process")
    shutil.copytree(working_dir, mine)  # each process its own copy: no shared SQLite file
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(working_dir)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        times = asyncio.run(measure(mine, f"http://127.0.0.1:{port}", args.mode, args.requests))
    finally:
        child.stdin.close()
        child.wait(60)
    results = {name: summary(seconds) for name, seconds in times.items()}
    base = results["in-process aquery"]["p50_ms"]
    for row in results.values():
        row["p50_overhead_ms"] = round(row["p50_ms"] - base, 3)
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
              "machine": {"python": platform.python_version(), "platform": platform.platform(),
                          "cpus": os.cpu_count(), "load_average_1_5_15": os.getloadavg()},
              "requests": args.requests, "mode": args.mode, "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'':46} {'p50 ms':>9} {'p95 ms':>9} {'p50 overhead':>13}")
    for name, row in results.items():
        print(f"{name:46} {row['p50_ms']:9.2f} {row['p95_ms']:9.2f} {row['p50_overhead_ms']:13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
