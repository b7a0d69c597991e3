"""kill -9 mid-ingestion, restart: every accepted document ends processed."""

from __future__ import annotations

import re
import signal
import time

from server_support import Server, client, make_keys, wait_job
from ragkit.testing.corpus import write_passages


def test_killed_server_resumes_and_loses_nothing(tmp_path):
    files = write_passages(tmp_path / "passages", limit=12)
    working_dir = tmp_path / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    server = Server(working_dir).start(delay=0.05)
    with client(server, keys.writer) as c:
        jobs = []
        for batch in (files[:5], files[5:]):
            r = c.post("/w/alpha/documents/upload", files=[("files", (p.name, p.read_bytes(), "text/plain")) for p in batch])
            assert r.status_code == 202
            jobs.append(r.json()["url"])
        deadline = time.monotonic() + 60
        while c.get(jobs[0]).json()["chunks"] == 0:  # extraction under way
            assert time.monotonic() < deadline
            time.sleep(0.05)
        unfinished = c.get(jobs[1]).json()["state"]
    server.stop(signal.SIGKILL)
    assert unfinished in ("queued", "running"), "killed mid-ingestion"
    accepted = {p.name for p in files}

    server.start(delay=0.0)
    try:
        with client(server, keys.writer) as c:
            done = [wait_job(c, url) for url in jobs]
            assert [j["state"] for j in done] == ["done", "done"], done
            page = c.get("/w/alpha/documents", params={"limit": 1000}).json()
        assert {d["path"] for d in page["documents"]} == accepted
        assert {d["status"] for d in page["documents"]} == {"processed"}
        assert not any((working_dir / "alpha" / "server" / "uploads").iterdir())
        assert re.search(r"resuming [12] unfinished ingestion job", server.log_text())
    finally:
        server.stop()
