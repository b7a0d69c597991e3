"""The workspace pool over HTTP: bounded, evicts idle workspaces for new
ones, closes idle ones, and never closes one a job is using (503 instead)."""

from __future__ import annotations

import re
import time

from server_support import Server, client, make_keys, wait_job


def _open(c) -> int:
    return int(float(re.search(r"^ragkit_open_workspaces (\S+)$", c.get("/metrics").text, re.M).group(1)))


def test_pool_bounds_evicts_and_closes_idle(tmp_path):
    working_dir = tmp_path / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    for ws in ("one", "two"):  # existing workspaces (a read never creates one)
        (working_dir / ws).mkdir()
    env = {"RAGKIT_SERVER__POOL_SIZE": "1", "RAGKIT_SERVER__IDLE_TIMEOUT": "1"}
    with Server(working_dir).start(delay=0.3, extra_env=env) as server:
        with client(server, keys.admin) as c:
            for ws in ("one", "two", "one"):  # each evicts the other, idle, for its place
                assert c.get(f"/w/{ws}/documents").status_code == 200
                assert _open(c) == 1
            deadline = time.monotonic() + 15
            while _open(c) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _open(c) == 0, "closed once idle for idle_timeout"
            r = c.post("/w/one/documents/texts", json={"texts": ["Ada Lovelace wrote notes. Charles Babbage built engines."]})
            busy = c.get("/w/two/documents")  # "one" is held by its ingestion job
            assert busy.status_code == 503 and "pool_size" in busy.json()["error"]
            assert wait_job(c, r.json()["url"])["state"] == "done"
            assert c.get("/w/two/documents").status_code == 200, "free again once the job ended"
