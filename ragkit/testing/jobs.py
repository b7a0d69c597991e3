"""Waiting for a ``ragkit serve`` ingestion job over HTTP (tests/server, tests/ray)."""

from __future__ import annotations

import time

import httpx


def wait_job(c: httpx.Client, url: str, timeout: float = 120) -> dict:
    """Poll the job at ``url`` until it is done or failed; its last state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = c.get(url).json()
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {url} did not finish: {job}")
