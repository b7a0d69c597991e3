"""``ragkit serve --workers 2``: two processes behind one port share a
workspace on the embedded stores. What one worker's job writes, the other
answers from (each RAG reloads what another process wrote when it next opens:
``Stores.refresh``), and writes from both go through the workspace's writer
lock."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from server_support import Server, make_keys

W = "/w/alpha"


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_two_workers_share_one_workspace(tmp_path):
    working_dir = tmp_path / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    with Server(working_dir).start(extra_env={"RAGKIT_SERVER__WORKERS": "2"}) as server:
        assert len(_children(server.proc.pid)) >= 2, "uvicorn runs two worker processes"
        auth = {"Authorization": f"Bearer {keys.writer}"}
        texts = [f"Keeper {i} of the Vellmoor light logged storm number {i}." for i in range(6)]
        for text in texts:  # a new connection each time: both workers take writes
            r = httpx.post(f"{server.url}{W}/documents/texts", json={"texts": [text]}, headers=auth, timeout=60)
            assert r.status_code == 202, r.text
        seen: set[str] = set()
        for _ in range(40):  # until every text is indexed, whichever worker answers
            listing = httpx.get(f"{server.url}{W}/documents", params={"status": "processed", "limit": 100},
                                headers=auth, timeout=60)
            assert listing.status_code == 200, listing.text
            seen = {d["id"] for d in listing.json()["documents"]}
            if len(seen) == len(texts):
                break
            time.sleep(0.5)
        assert len(seen) == len(texts), seen
        for _ in range(8):  # fresh connections reach both workers; each answers from all documents
            r = httpx.post(f"{server.url}{W}/query/context", json={"question": "Vellmoor light storms", "mode": "naive",
                                                                  "chunk_top_k": 10}, headers=auth, timeout=60)
            assert r.status_code == 200, r.text
            assert len({ref["doc_id"] for ref in r.json()["sources"]}) == len(texts), r.json()["sources"]
    assert "Traceback" not in server.log_text()
