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


def _kill_mid_job(server: Server, key: str, url: str) -> dict:
    """The job once it is extracting, and the server killed then (or stopped,
    whatever goes wrong: a failing test leaves no server behind)."""
    try:
        with client(server, key) as c:
            deadline = time.monotonic() + 60
            while (job := c.get(url).json())["state"] != "running" or job["chunks"] == 0:
                assert time.monotonic() < deadline and job["state"] != "done", job["state"]
                time.sleep(0.05)
    finally:
        server.stop(signal.SIGKILL)
    return job


def test_a_job_the_server_keeps_dying_in_fails_after_its_attempts_and_counts_right(tmp_path):
    """Issue 25 items 6 and 11: a job that was running at every one of
    ``job_attempts`` crashes is failed at the next start, not run again (a file
    that kills the server would kill it at every restart); a resumed job's
    counts start afresh (it showed ``documents_done`` 60 of 30)."""
    files = write_passages(tmp_path / "passages", limit=40)  # some left to extract after each kill
    working_dir = tmp_path / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    attempts = {"RAGKIT_SERVER__JOB_ATTEMPTS": "2", "RAGKIT_INDEX__LLM_CONCURRENCY": "2"}
    server = Server(working_dir).start(delay=0.2, extra_env=attempts)
    with client(server, keys.writer) as c:
        r = c.post("/w/alpha/documents/upload", files=[("files", (p.name, p.read_bytes(), "text/plain")) for p in files])
        url = r.json()["url"]
    first = _kill_mid_job(server, keys.writer, url)
    server.start(delay=0.2, extra_env=attempts)  # second start: resumed
    second = _kill_mid_job(server, keys.writer, url)
    assert second["attempts"] == 2 and second["documents_done"] <= second["documents"] == len(files), second
    server.start(delay=0.0, extra_env=attempts)  # third start: given up
    try:
        with client(server, keys.writer) as c:
            job = wait_job(c, url)
        assert first["attempts"] == 1
        assert job["state"] == "failed" and "2 times" in job["error"] and "not run again" in job["error"], job
        assert "resuming" not in server.log_text().split("server-")[-1] or "interrupted 2 times" in server.log_text()
        assert not (working_dir / "alpha" / "server" / "uploads" / url.rsplit("/", 1)[1]).exists()
    finally:
        server.stop()

    # Resumed once and finished: counts are those of the one run that finished.
    server = Server(tmp_path / "data2")
    server.working_dir.mkdir()
    keys = make_keys(server.working_dir)
    server.start(delay=0.2, extra_env=attempts)
    with client(server, keys.writer) as c:
        url = c.post("/w/alpha/documents/upload",
                     files=[("files", (p.name, p.read_bytes(), "text/plain")) for p in files]).json()["url"]
    _kill_mid_job(server, keys.writer, url)
    server.start(delay=0.0)
    try:
        with client(server, keys.writer) as c:
            job = wait_job(c, url)
        assert job["state"] == "done" and job["attempts"] == 2
        assert job["documents_done"] == job["documents"] == len(files) == len(job["processed"]) + len(job["skipped"])
    finally:
        server.stop()
