"""Child process for ``test_pg_kill9.py``: index MuSiQue passages into an
all-PostgreSQL workspace, and SIGKILL itself in the middle of a commit.

Usage: ``python pg_kill_worker.py DSN WORKSPACE OUT_DIR [--kill TARGET/N/WHEN] [--resume]``

Two steps: insert passages 0-23, then passages 18-29 (``max_batch_docs`` 3,
so several commits each). ``--kill graph.upsert_edges/2/after`` kills the
process right after the 2nd call of ``stores.graph.upsert_edges`` of the first
step made inside a commit's transaction (calls outside one are not
counted). Just before, it writes
``OUT_DIR/killed.json``: what the batch's own transaction sees (its writes)
and what every other connection sees, as ``committed_view`` snapshots; and at
the first write of each commit (``chunks.upsert``) it writes
``OUT_DIR/before.json``, the committed state then. ``--resume`` runs both
steps again, as a user would after the crash. The harness (documents, model,
kill) is tests/pipeline/kill_worker.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "pipeline"))

from kill_worker import STORES, RecordingLLM, die, documents, index_config  # noqa: E402

from ragkit.backends import build_stores  # noqa: E402
from ragkit.core.stores import Stores  # noqa: E402
from ragkit.rag import RAG  # noqa: E402
from ragkit.settings import Settings  # noqa: E402
from ragkit.testing import HashEmbedder  # noqa: E402
from ragkit.testing.snapshot import store_snapshot  # noqa: E402
from ragkit_postgres._db import _CURRENT  # noqa: E402 - the open transaction, to kill inside a commit

DIMENSION = 32
PLAN = (slice(0, 24), slice(18, 30))
COMMITTED = ("nodes", "edges", "chunks", "extractions", "chunk_vectors", "entity_vectors", "relation_vectors")
"""What only a commit writes (documents and statuses are also written outside commits)."""


def pg_settings(dsn: str, workspace: str, working_dir: Path) -> Settings:
    backend = {"name": "postgres", "options": {"dsn": dsn, "hnsw_ef_search": 1000}}
    return Settings(working_dir=working_dir, workspace=workspace,
                    **{kind: backend for kind in ("kv", "doc_status", "vector", "graph")})


async def committed_view(stores: Stores) -> dict:
    """The commit-owned parts of ``store_snapshot`` and the processed documents."""
    snap = await store_snapshot(stores)
    view = {k: snap[k] for k in COMMITTED}
    view["edges"] = {"|".join(k): v for k, v in view["edges"].items()}
    view["processed"] = sorted(i for i, s in snap["doc_status"].items() if s == "processed")
    return view


async def outside_view(settings: Settings) -> dict:
    """``committed_view`` from a fresh context: outside the batch transaction,
    as any other connection sees it."""
    async def read() -> dict:
        stores = build_stores(settings, DIMENSION)
        await stores.open()
        try:
            return await committed_view(stores)
        finally:
            await stores.close()

    return await asyncio.get_running_loop().create_task(read(), context=contextvars.Context())


class Switch:
    def __init__(self, spec: str | None, settings: Settings, rag: RAG, out: Path) -> None:
        self.spec, self.settings, self.rag, self.out = spec, settings, rag, out
        self.step, self.calls = 0, {}
        if spec:
            self.target, n, self.when = spec.split("/")
            self.n = int(n)

    def wrap(self, owner: object, attr: str, name: str) -> None:
        real = getattr(owner, attr)

        async def wrapped(*args, **kwargs):
            if not _CURRENT.get():  # counted inside commits only (extraction also writes statuses)
                return await real(*args, **kwargs)
            count = self.calls[name] = self.calls.get(name, 0) + 1
            if self.spec and self.step == 0:
                if name == "chunks.upsert":  # a commit's first write: the state before its batch
                    (self.out / "before.json").write_text(json.dumps(await outside_view(self.settings)))
                if name == self.target and count == self.n and self.when == "before":
                    await self.kill()
            result = await real(*args, **kwargs)
            if self.spec and self.step == 0 and name == self.target and count == self.n:
                await self.kill()
            return result

        setattr(owner, attr, wrapped)

    async def kill(self) -> None:
        inside = await committed_view(self.rag.stores)  # this task: in the batch transaction
        outside = await outside_view(self.settings)
        (self.out / "killed.json").write_text(json.dumps({"inside": inside, "outside": outside}))
        die()


async def main(dsn: str, workspace: str, out: Path, kill: str | None) -> None:
    settings = pg_settings(dsn, workspace, out)
    docs = documents()
    llm = RecordingLLM({"latency": 0.002})
    rag = RAG(settings, llm=llm, embedder=HashEmbedder({"dimension": DIMENSION}), index=index_config())
    switch = Switch(kill, settings, rag, out)
    for name in STORES:
        store = getattr(rag.stores, name)
        for method in ("upsert", "upsert_nodes", "upsert_edges"):
            if hasattr(store, method):
                switch.wrap(store, method, f"{name}.{method}")
    async with rag:
        for step, part in enumerate(PLAN):
            switch.step, switch.calls = step, {}
            report = await rag.indexer().insert(docs[part])
            assert not report.failed, report.failed
    (out / "calls.json").write_text(json.dumps({"keys": llm.keys, "roles": llm.roles}))
    print("FINISHED", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("workspace")
    parser.add_argument("out", type=Path)
    parser.add_argument("--kill")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(args.dsn, args.workspace, args.out, args.kill))
