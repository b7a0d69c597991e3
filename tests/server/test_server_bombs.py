"""Bombs uploaded to a live ``ragkit serve``: the job ends ``done`` with each
bomb under ``failed`` naming the limit that stopped it, the genuine files
beside them are indexed, ``/health`` answers within a second all along, and
the server's peak memory hardly moves (the loaders run in a child process,
``ragkit.pipeline.load_isolated``, off the event loop).

Troubleshooting: a slow ``/health`` means loading runs on the event loop
again (``JobManager._documents``); a large peak means it runs in the server's
process; a bomb missing from ``failed`` means the job drops load failures."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from ragkit.testing.bombs import (
    BILLION_LAUGHS, entity_file, lie_about_size, normal_file, pdf_bomb, status_bytes, xxe_doctype, zip_bomb,
)
from server_support import Server, client, make_keys, wait_job

W = "/w/alpha"
MiB = 1 << 20
CANARY = "CANARY-server-7f3a-the-local-file-an-XXE-would-read"
MAX_GROWTH = 64 * MiB
"""What the server's peak may rise by while the bombs are read: a job's bookkeeping, not a bomb."""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Upload name -> (file, what its failure names); ``None``: a genuine file."""
    folder = tmp_path_factory.mktemp("uploads")
    canary = folder / "canary.txt"
    canary.write_text(CANARY)
    made = {f"bomb{ext}": (zip_bomb(folder / f"bomb{ext}", 300 * MiB), "([loaders] max_entry_bytes)")
            for ext in (".epub", ".docx", ".pptx", ".xlsx")}
    made["lie.docx"] = (lie_about_size(shutil.copy(made["bomb.docx"][0], folder / "lie.docx")),
                        "inflates past the 4 KiB its zip directory states")
    made["laughs.xlsx"] = (entity_file(folder / "laughs.xlsx", BILLION_LAUGHS, b"&lol9;"), "declares XML entities")
    made["xxe.epub"] = (entity_file(folder / "xxe.epub", xxe_doctype(canary), b"&xxe;"), "declares XML entities")
    made["bomb.pdf"] = (pdf_bomb(folder / "bomb.pdf", 300 * MiB), "pypdf's limit")
    made["fine.docx"] = (normal_file(folder / "fine.docx", "The Word lantern of the Okapi vault is teal."), None)
    made["fine.epub"] = (normal_file(folder / "fine.epub", "The EPUB lantern of the Okapi vault is teal."), None)
    return made


@contextmanager
def serve(tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[Server, str]]:
    working_dir = tmp_path / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    with Server(working_dir).start(extra_env=env) as server:
        with client(server, keys.writer) as c:  # open the workspace first: its stores are not a bomb's cost
            r = c.post(f"{W}/documents/texts", json={"texts": ["The warm-up text of the Okapi vault."]})
            assert wait_job(c, r.json()["url"])["state"] == "done"
        yield server, keys.writer


class HealthWatch:
    """Asks ``/health`` every 50 ms with a 1 s timeout; the slowest answer and any failure."""

    def __init__(self, server: Server) -> None:
        self.url, self.slowest, self.failures = server.url + "/health", 0.0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        with httpx.Client(timeout=1.0) as c:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    c.get(self.url).raise_for_status()
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                self.slowest = max(self.slowest, time.monotonic() - started)
                time.sleep(0.05)


def upload(server: Server, key: str, named: dict[str, Path]) -> tuple[dict, HealthWatch, int]:
    """Upload the files in one request and wait for the job, watching /health
    and the server's peak memory (reset first: root may write any process's clear_refs)."""
    pid = server.proc.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = status_bytes("VmRSS", pid)
    with HealthWatch(server) as watch, client(server, key) as c:
        r = c.post(f"{W}/documents/upload",
                   files=[("files", (name, path.read_bytes(), "application/octet-stream")) for name, path in named.items()])
        assert r.status_code == 202, r.text
        job = wait_job(c, r.json()["url"], timeout=300)
    return job, watch, status_bytes("VmHWM", pid) - before


def test_bombs_fail_alone_and_the_server_stays_up(tmp_path, files):
    with serve(tmp_path, {"RAGKIT_SERVER__LOADER_TIMEOUT": "120"}) as (server, key):
        job, health, grown = upload(server, key, {name: path for name, (path, _) in files.items()})
        assert job["state"] == "done", job
        for name, (_, named) in files.items():
            if named:
                assert named in job["failed"].get(name, ""), (name, job["failed"])
        assert len(job["processed"]) == 2, job
        assert CANARY not in repr(job)
        assert not health.failures and health.slowest < 1.0, (health.slowest, health.failures[:3])
        assert grown < MAX_GROWTH, f"the server's peak grew by {grown >> 20} MiB"
        assert server.proc.poll() is None


def test_a_bomb_past_raised_bounds_fails_on_the_loaders_memory_limit(tmp_path, files):
    """With the [loaders] bounds raised out of the way, only the loading
    process's memory limit stands between a 1 GiB EPUB bomb and the server."""
    bomb = zip_bomb(tmp_path / "big.epub", 1 << 30)
    env = {
        "RAGKIT_LOADERS__MAX_ENTRY_BYTES": str(1 << 40), "RAGKIT_LOADERS__MAX_DECOMPRESSED_BYTES": str(1 << 40),
        "RAGKIT_LOADERS__MAX_COMPRESSION_RATIO": "1e9", "RAGKIT_SERVER__LOADER_MEMORY_BYTES": str(768 * MiB),
    }
    with serve(tmp_path, env) as (server, key):
        job, health, grown = upload(server, key, {"big.epub": bomb, "fine.docx": files["fine.docx"][0]})
        assert job["state"] == "done", job
        assert "the limit is 768 MiB for reading one file ([server] loader_memory_bytes)" in job["failed"]["big.epub"]
        assert len(job["processed"]) == 1, job
        assert not health.failures and health.slowest < 1.0, (health.slowest, health.failures[:3])
        assert grown < MAX_GROWTH, f"the server's peak grew by {grown >> 20} MiB"
