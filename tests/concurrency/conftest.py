"""Real separate processes on one workspace: what they share and how they run.

A *workspace* here is a set of ``RAGKIT_*`` variables: the embedded defaults in
a temporary folder, or the server combination of the backend matrix (Redis for
KV and doc status, Neo4j over Bolt, Chroma over HTTP) with a fresh workspace
name; tests that ask for it (``indirect`` parametrisation) also get
``neo4j-graph``, the embedded stores with the graph in Neo4j (whose writer
lease the graph store holds). Addresses come from the adapters' contract options (``RAGKIT_REDIS_URL``,
``RAGKIT_NEO4J_URI``, ``RAGKIT_CHROMA_URL``, set by ``make test``); a server
that is unreachable skips, unless ``RAGKIT_MATRIX_REQUIRE`` names ``servers``:
then it fails, as in ``tests/integration/test_backend_matrix.py``.

Every process is the ``ragkit`` CLI (``python -m ragkit``) or ``python -c``
with the API, with the offline LLM and the hash embedder.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ragkit.plugins import get_registry
from ragkit.rag import RAG
from ragkit.settings import load_settings
from ragkit.testing.contracts.options import contract_options

SERVERS = {"kv": "redis", "doc_status": "redis", "vector": "chroma-http", "graph": "neo4j"}
NEO4J_GRAPH = {"graph": "neo4j"}
REQUIRED = {p.strip() for p in os.environ.get("RAGKIT_MATRIX_REQUIRE", "").split(",") if p.strip()}
COMBOS = ["embedded", "servers"]
WAITING = "waiting for the writer"
HOLDING_WRITER = """
import asyncio, sys, time
from pathlib import Path
from ragkit.rag import RAG
async def main():
    async with RAG() as rag:
        async with rag.stores.writing("index"):
            await rag.ainsert(paths=[sys.argv[1]])
            deadline = time.monotonic() + 60
            while not Path(sys.argv[2]).exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
asyncio.run(main())
"""
"""Indexes a folder through the API, then keeps holding the lock until the test
creates a file: until another writer says it is waiting (``Workspace.overlap``)."""

PEOPLE = ["Alice Moreau", "Bruno Keller", "Chen Wei", "Dara Okafor", "Elena Petrova", "Farid Haddad"]
COMPANIES = ["Northwind Labs", "Bluepeak Metals", "Corvid Systems", "Delta Freight"]
CITIES = ["Lisbon", "Osaka", "Toronto", "Nairobi", "Tallinn"]


def write_corpus(folder: Path, tag: str, n: int) -> list[Path]:
    """``n`` small documents sharing people, companies and cities (so a delete
    must recompute shared entities), each naming one entity of its own,
    ``Project <tag><i>``, that only it mentions."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        person, other = PEOPLE[i % len(PEOPLE)], PEOPLE[(i + 2) % len(PEOPLE)]
        company, city = COMPANIES[i % len(COMPANIES)], CITIES[(i + 1) % len(CITIES)]
        own = f"Project {tag.capitalize()}{i}"
        text = (
            f"# {own}\n\n{own} is led by {person} in {city}. {person} hired {company} to build "
            f"the {own} prototype. {company} delivered the parts for {own} late, so {other} "
            f"audited {company} in {city}. {other} reported to {person} about {own}.\n"
        )
        path = folder / f"{tag}{i:02d}.md"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


@dataclass
class Run:
    """A finished process."""

    args: list[str]
    code: int
    out: str
    err: str

    def ok(self) -> Run:
        assert self.code == 0 and "Traceback" not in self.err, f"{self.args} exited {self.code}:\n{self.err}"
        return self


@dataclass
class Workspace:
    combo: str
    root: Path
    env: dict[str, str]
    started: list[subprocess.Popen] = field(default_factory=list)

    def start(self, *args: str, python: str | None = None, **env: str) -> subprocess.Popen:
        """A ``ragkit`` CLI run (or ``python -c <python> args...``) in its own process."""
        argv = [sys.executable, "-c", python, *args] if python is not None else [sys.executable, "-m", "ragkit", *args]
        n = len(self.started)
        out, err = self.root / f"p{n}.out", self.root / f"p{n}.err"
        with out.open("w") as out_file, err.open("w") as err_file:  # the child keeps its own copies
            proc = subprocess.Popen(argv, cwd=self.root, env={**self.env, **env}, stdout=out_file, stderr=err_file)
        proc.argv, proc.files = argv, (out, err)  # type: ignore[attr-defined]
        self.started.append(proc)
        return proc

    def wait(self, proc: subprocess.Popen, timeout: float = 120) -> Run:
        code = proc.wait(timeout=timeout)
        out, err = (p.read_text(encoding="utf-8", errors="replace") for p in proc.files)  # type: ignore[attr-defined]
        return Run(proc.argv, code, out, err)  # type: ignore[attr-defined]

    def run(self, *args: str, **env: str) -> Run:
        return self.wait(self.start(*args, **env))

    def settings(self):
        return load_settings(env=self.env).settings

    def api(self, coro_fn):
        """Run ``coro_fn(rag)`` in this (test) process, once the others are done."""

        async def go():
            async with RAG(self.settings()) as rag:
                return await coro_fn(rag)

        return asyncio.run(go())

    def holding_writer(self, folder: Path, **env: str) -> subprocess.Popen:
        """A writer that indexes ``folder`` and holds the lock until ``overlap`` releases it."""
        proc = self.start(str(folder), str(self.root / f"release-{len(self.started)}"), python=HOLDING_WRITER, **env)
        self.wait_for_writer(proc)
        return proc

    def overlap(self, holder: subprocess.Popen, waiter: subprocess.Popen, timeout: float = 60) -> None:
        """Once ``waiter`` says it waits for the writer, let ``holder`` finish."""
        deadline = time.monotonic() + timeout
        while WAITING not in waiter.files[1].read_text(errors="replace"):  # type: ignore[attr-defined]
            assert waiter.poll() is None, f"{waiter.argv} ended without waiting:\n{self.wait(waiter).err}"  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, f"{waiter.argv} never said it was waiting"  # type: ignore[attr-defined]
            time.sleep(0.05)
        Path(holder.argv[-1]).touch()  # type: ignore[attr-defined]

    def wait_for_writer(self, proc: subprocess.Popen, timeout: float = 60) -> dict:
        """Block until ``proc`` holds the workspace's writer lock; its holder record."""

        async def poll(rag):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found = await rag.stores.lock.lease.holder()
                if found is not None and found.pid == proc.pid:
                    return found.model_dump()
                if proc.poll() is not None:
                    return None
                await asyncio.sleep(0.05)
            raise AssertionError(f"{proc.argv} did not take the writer lock within {timeout}s")  # type: ignore[attr-defined]

        held = self.api(poll)
        assert held is not None, f"{proc.argv} ended before it took the lock:\n{self.wait(proc).err}"  # type: ignore[attr-defined]
        return held


def server_env(tmp_path: Path, backends: dict[str, str] = SERVERS) -> dict[str, str]:
    registry = get_registry()
    env: dict[str, str] = {}
    for kind, name in backends.items():
        if name not in registry.names(kind):
            message = f"{kind} adapter {name!r} is not installed"
            pytest.fail(message) if "servers" in REQUIRED else pytest.skip(message)
        try:
            options = contract_options(kind, name, tmp_path)
        except pytest.skip.Exception as exc:
            if "servers" in REQUIRED:
                pytest.fail(f"combination 'servers' is required but {kind}:{name} is unreachable: {exc.msg}")
            raise
        env[f"RAGKIT_{kind.upper()}"] = name
        for key, value in options.items():
            env[f"RAGKIT_{kind.upper()}__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


@pytest.fixture(params=COMBOS)
def workspace(request, tmp_path) -> Workspace:
    combo = request.param
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k.endswith(("_URL", "_URI"))}
    env.update(
        RAGKIT_WORKING_DIR=str(tmp_path / "data"),
        RAGKIT_WORKSPACE=f"c{uuid.uuid4().hex[:10]}",
        RAGKIT_LOCK__TIMEOUT="120",
        PYTHONUNBUFFERED="1",
    )
    if combo == "servers":
        env.update(server_env(tmp_path))
    else:
        if combo == "neo4j-graph":
            env.update(server_env(tmp_path, NEO4J_GRAPH))
        # Large vectors make large snapshots, so that flushes append to journals
        # (where the crashes came from) rather than rewrite small snapshots.
        env["RAGKIT_EMBEDDER__DIMENSION"] = "2048"
    ws = Workspace(combo, tmp_path, env)
    yield ws
    for proc in ws.started:
        if proc.poll() is None:
            proc.kill()  # SIGKILL ends a stopped process too
            proc.wait()
    if combo != "embedded":  # leave nothing behind on shared servers

        async def drop(rag):
            for store in rag.stores.all():
                await store.drop()

        ws.api(drop)
