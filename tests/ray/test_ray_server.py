"""``ragkit serve`` with ``[index] executor = "ray"`` (set by its environment,
as a deployment would): an ingestion job's model calls run in the cluster's
model actors, never in the server process, and the documents are indexed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
from ray_runs import calls, env

from ragkit.server.keys import KeyStore
from ragkit.testing.jobs import wait_job
from ragkit.testing.ray_cluster import free_port


def test_a_server_ingestion_job_runs_its_model_calls_on_the_cluster(tmp_path, ray_cluster, corpus):
    data, log, port = tmp_path / "data", tmp_path / "calls.log", free_port()
    (data / "default").mkdir(parents=True)
    key = KeyStore(data / "server_keys.sqlite").create(["default"], "ingest", [], "write")[1]
    server_env = {
        **env(), "RAGKIT_WORKING_DIR": str(data), "RAGKIT_EMBEDDER": "hash", "RAGKIT_LLM": "replay",
        "RAGKIT_LLM__CALL_LOG": str(log), "RAGKIT_INDEX__EXECUTOR": "ray",
        "RAGKIT_INDEX__RAY__ADDRESS": ray_cluster.address,
    }
    server_env.pop("RAGKIT_CONFIG", None)
    out = open(tmp_path / "server.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "ragkit", "serve", "--port", str(port)], env=server_env,
                              stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        texts = [p.read_text(encoding="utf-8") for p in sorted(Path(corpus).iterdir())[:6]]
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
            r = c.post("/w/default/documents/texts", json={"texts": texts})
            assert r.status_code == 202, r.text
            job = wait_job(c, r.json()["url"])
        assert job["state"] == "done" and len(job["processed"]) == 6, json.dumps(job)[:2000]
        actors = ray_cluster.model_worker_pids()  # the server's actors live until it closes the workspace
    finally:
        server.terminate()
        server.wait(timeout=60)
        out.close()
    answering = {pid for event, pid, role, _ in calls(log) if event == "end" and role == "extraction"}
    assert len([1 for e, _, role, _ in calls(log) if e == "end" and role == "extraction"]) == 6
    assert answering and server.pid not in answering and answering <= actors

