"""The real server for tests/server: ``ragkit serve`` in a subprocess on a free
loopback port, talked to over HTTP with httpx. (A module of its own, not
conftest: ``from conftest import`` finds whichever conftest was imported first
when several test folders run together.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ragkit.server.keys import KeyStore
from ragkit.testing.ports import free_port
from ragkit.testing.jobs import wait_job  # noqa: F401 - the tests import it from here

HERE = Path(__file__).resolve().parent
LEAK_CANARY = "sk-canary-backend-secret-3f9a1c"
"""A backend credential the servers run with; no log line or body may show it."""


@dataclass
class Server:
    working_dir: Path
    port: int = 0
    env: dict = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, delay: float = 0.0, extra_env: dict | None = None) -> Server:
        """``extra_env`` adds to and overrides the defaults; a ``None`` value
        removes one (``RAGKIT_LLM__DELAY`` for an LLM without that option)."""
        self.port = self.port or free_port()  # a restart keeps its port (job URLs name it)
        env = {
            **os.environ,
            "RAGKIT_WORKING_DIR": str(self.working_dir),
            "RAGKIT_EMBEDDER": "hash",
            "RAGKIT_LLM": "slow_llm:SlowOfflineLLM",
            "RAGKIT_LLM__DELAY": str(delay),
            "RAGKIT_LLM__API_KEY": LEAK_CANARY,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            **(extra_env or {}),
        }
        env = {k: v for k, v in env.items() if v is not None}
        env.pop("RAGKIT_CONFIG", None)
        self.log = self.working_dir.parent / f"server-{self.port}.log"
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragkit", "serve", "--port", str(self.port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self.working_dir.parent,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the server exited: {self.log.read_text()}"
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"the server did not start: {self.log.read_text()}")

    def __enter__(self) -> Server:
        """``with Server(dir).start() as server:`` stops it however the block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.proc = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""


@dataclass
class Keys:
    admin: str
    writer: str
    reader: str
    other: str
    """bound to workspace "other" only"""


def make_keys(working_dir: Path) -> Keys:
    """Keys as ``ragkit keys create`` makes them: each named workspace exists
    from then on (a read never creates one)."""
    for workspace in ("alpha", "other"):
        (working_dir / workspace).mkdir(parents=True, exist_ok=True)
    store = KeyStore(working_dir / "server_keys.sqlite")
    return Keys(
        admin=store.create(["*"], "root", ["ops"], "admin")[1],
        writer=store.create(["alpha"], "wendy", ["team"], "write")[1],
        reader=store.create(["alpha"], "rita", ["team"], "read")[1],
        other=store.create(["other"], "olga", [], "write")[1],
    )


def client(server: Server, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60)
