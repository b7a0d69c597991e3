"""The scale run on PostgreSQL (``bench.py --only scale-postgres``): all four
stores in one PostgreSQL 18 with pgvector that the harness starts itself
(``plugins/ragkit-postgres/scripts/postgres-server``, a fresh cluster per
factor on a port of its own), and, right before each factor, the embedded
stores at the same factor as the reference its p50 ratios are taken against
(same load on a shared machine, minutes apart).

Besides the figures every scale row has (index time, ragkit's peak RSS, query
p50 per mode), a PostgreSQL row holds the database's peak memory (the
postgres processes sampled every 0.2 s while the run lasts: the sum of their
RSS, and of their PSS, which counts shared buffers once) and its size
(``pg_database_size`` after the run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _shared import reference

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

POSTGRES_PORT = "0"
"""The benchmark's own server's port; 0: one free at start (never CI's, a developer's or another run's)."""
STORES = ("kv", "doc_status", "vector", "graph")


@contextlib.contextmanager
def bench_postgres(work: Path, port: str = POSTGRES_PORT) -> Iterator[tuple[str, Path]]:
    """A fresh PostgreSQL with pgvector on loopback, always stopped (its data
    removed); yields its DSN and data folder."""
    state = work / "postgres"
    port = port if port != "0" else str(_free_port())
    env = {**os.environ, "RAGKIT_POSTGRES_PORT": port, "RAGKIT_POSTGRES_DIR": str(state)}
    script = [sys.executable, str(ROOT / "plugins/ragkit-postgres/scripts/postgres-server")]
    subprocess.run([*script, "start"], env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", state / "data"
    finally:
        subprocess.run([*script, "stop"], env=env, check=False, stdout=subprocess.DEVNULL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_settings(dsn: str) -> list[str]:
    """The ``--backend-settings`` of a scale run with every store on ``dsn``."""
    return ["--backend-settings", json.dumps({kind: {"name": "postgres", "options": {"dsn": dsn}} for kind in STORES})]


class DatabaseMemory:
    """Samples the memory of a PostgreSQL cluster's processes (the postmaster
    named in ``postmaster.pid`` and its children) in a thread; keeps the peak
    sums of RSS and of PSS in MiB."""

    def __init__(self, data: Path, every: float = 0.2) -> None:
        self.data = data
        self.every = every
        self.peak_rss_mib = 0.0
        self.peak_pss_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DatabaseMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss, pss = self.sample()
            self.peak_rss_mib = max(self.peak_rss_mib, rss)
            self.peak_pss_mib = max(self.peak_pss_mib, pss)
            self._stop.wait(self.every)

    def sample(self) -> tuple[float, float]:
        try:
            root = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0, 0.0
        rss = pss = 0
        for pid in [root, *_children(root)]:
            rss += _kib(f"/proc/{pid}/status", "VmRSS:")
            pss += _kib(f"/proc/{pid}/smaps_rollup", "Pss:")
        return rss / 1024, pss / 1024


def _children(parent: int) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                # the command may hold spaces and parentheses: the fields after the last ")"
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # the process ended meanwhile
            if int(fields[1]) == parent:
                out.append(int(entry.name))
    return out


def _kib(path: str, key: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass  # the process ended meanwhile: it holds no memory any more
    return 0


def database_size_mib(dsn: str) -> float:
    import asyncpg

    async def size() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetchval("SELECT pg_database_size(current_database())")
        finally:
            await conn.close()

    return round(asyncio.run(size()) / 2**20, 1)


def postgres_scale_runs(r: Any, scale_runs: Any, rk: list, inputs: Path, work: Path, factors: list[int],
                        args: Any) -> list[dict[str, Any]]:
    """Per factor: the embedded reference, then the same run on a fresh
    PostgreSQL while its memory is sampled. Stops at the first that fails."""
    rows: list[dict[str, Any]] = []
    for factor in factors:
        ref = scale_runs(r, rk, inputs, work, [factor], "embedded", [], args)[0]
        if "failed" in ref:
            rows.append({"factor": factor, "backend": "postgres", "failed": "the embedded reference: " + ref["failed"]})
            break
        with bench_postgres(work) as (dsn, data), DatabaseMemory(data) as memory:
            row = scale_runs(r, rk, inputs, work, [factor], "postgres", backend_settings(dsn), args)[0]
            if "failed" not in row:
                row["db_size_mib"] = row["disk_mib"] = database_size_mib(dsn)
        if "failed" not in row:
            row.update(db_peak_rss_mib=round(memory.peak_rss_mib, 1), db_peak_pss_mib=round(memory.peak_pss_mib, 1))
            row["reference"] = reference(ref)
        rows.append(row)
        if "failed" in row:
            break
    return rows
