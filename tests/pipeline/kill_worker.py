"""Child process for ``test_index_kill9.py``: index MuSiQue passages, and
SIGKILL itself at a chosen point.

Usage: ``python kill_worker.py WORKING_DIR OUT_JSON [--kill STEP/TARGET/N/WHEN] [--resume]``

The work is a fixed plan of steps, run in order on one workspace:

0. insert passages 0-39 (``max_batch_docs`` is small, so many commits)
1. insert passages 20-59 (a second run: 20-39 are skipped)
2. delete passages 3, 11 and 45
3. insert new versions of the files of passages 5 and 50 (replaces them)

``--kill 1/graph.flush/2/after`` kills the process right after the 2nd call of
``stores.graph.flush`` made during step 1. TARGET is ``<store>.<method>`` for a
store of ``Stores`` (the method is wrapped on the instance: fault injection,
nothing is faked), ``stores.flush`` for the flush of all stores, or ``llm`` for
a call of the model itself (not a cache hit). WHEN is ``before`` or ``after``.

``--resume`` is the restart after a kill: the step that was running is run
again (for an insert, what a user would do) or, for a delete, only recovered
(``insert([])``: recovery alone must finish an interrupted delete); then the
remaining steps run.

Progress goes to ``WORKING_DIR/progress.txt`` (``start i`` / ``done i``) and
stdout (``STEP i``). On a normal finish, OUT_JSON gets the model calls this
process made (the cache key and role of each) and ``trace``: how often each
target was called in each step, to choose N for a new kill point.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from ragkit.pipeline.index import IndexConfig
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique

N_DOCS = 60
DELETED = (3, 11, 45)
REPLACED = {5: 60, 50: 61}
"""file of passage i -> passage that becomes its new content"""
STEPS = ("insert", "insert", "delete", "insert")
STORES = (
    "full_docs", "chunks", "extractions", "llm_cache", "doc_paths", "aliases",
    "chunk_vectors", "entity_vectors", "relation_vectors", "graph", "doc_status",
)


def documents() -> list[Document]:
    corpus = load_musique()[0]

    def doc(i: int, path_of: int) -> Document:
        p = corpus[i]
        return Document.from_text(p["title"] + "\n" + p["text"], file_path=f"musique/{path_of}.txt")

    return [doc(i, i) for i in range(N_DOCS)] + [doc(new, old) for old, new in REPLACED.items()]


def index_config() -> IndexConfig:
    # Small chunks: most passages give 2-4 chunks, so a kill can fall between
    # the chunks of one document. Small batches: many commits.
    return IndexConfig(chunk_size=96, chunk_overlap=16, llm_concurrency=4, max_docs_in_flight=8, max_batch_docs=3)


class KillSwitch:
    """Counts calls of one target during one step; SIGKILLs the process at the N-th."""

    def __init__(self, spec: str | None) -> None:
        self.step = -1
        self.target = None
        if spec:
            step, self.target, n, self.when = spec.split("/")
            self.kill_step, self.n = int(step), int(n)
            assert self.when in ("before", "after"), spec
        self.count = 0
        self.trace: dict[str, int] = {}
        """"step/target" -> calls, of every wrapped target"""

    def wrap(self, owner: object, attr: str, name: str) -> None:
        real = getattr(owner, attr)

        async def wrapped(*args, **kwargs):
            at = f"{self.step}/{name}"
            self.trace[at] = self.trace.get(at, 0) + 1
            hit = False
            if name == self.target and self.step == self.kill_step:
                self.count += 1
                hit = self.count == self.n
            if hit and self.when == "before":
                die()
            result = await real(*args, **kwargs)
            if hit:
                die()
            return result

        setattr(owner, attr, wrapped)


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class RecordingLLM(ReplayLLM):
    """The replay model, noting the cache key of every call that reaches it."""

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.keys: list[str] = []
        self.roles: list[str] = []

    async def complete(self, request):
        completion = await super().complete(request)
        self.keys.append(request.cache_key(self.model_id))
        self.roles.append(request.role)
        return completion


async def main(workdir: Path, out: Path, kill: str | None, resume: bool) -> None:
    progress = workdir / "progress.txt"
    first, recover_only = 0, False
    if resume:
        lines = progress.read_text().split()
        started = max(int(lines[i + 1]) for i in range(0, len(lines), 2) if lines[i] == "start")
        first, recover_only = started, STEPS[started] == "delete"
    docs = documents()
    plan = [
        docs[0:40],
        docs[20:60],
        [docs[i].id for i in DELETED],
        docs[N_DOCS:],
    ]
    switch = KillSwitch(kill)
    llm = RecordingLLM({"latency": 0.005})
    switch.wrap(llm, "complete", "llm")
    rag = RAG(Settings(working_dir=workdir), llm=llm, embedder=HashEmbedder({"dimension": 32}), index=index_config())
    for name in STORES:
        store = getattr(rag.stores, name)
        for method in ("upsert", "delete", "flush", "upsert_nodes", "upsert_edges", "delete_nodes", "delete_edges"):
            if hasattr(store, method):
                switch.wrap(store, method, f"{name}.{method}")
    switch.wrap(rag.stores, "flush", "stores.flush")
    async with rag:
        for step in range(first, len(STEPS)):
            switch.step, switch.count = step, 0
            with progress.open("a") as fh:
                fh.write(f"start {step}\n")
            print(f"STEP {step}", flush=True)
            indexer = rag.indexer()
            if step == first and recover_only:
                await indexer.insert([])
            elif STEPS[step] == "delete":
                await indexer.delete(plan[step])
            else:
                report = await indexer.insert(plan[step])
                assert not report.failed, report.failed
            with progress.open("a") as fh:
                fh.write(f"done {step}\n")
    out.write_text(json.dumps({"keys": llm.keys, "roles": llm.roles, "unknown_prompts": llm.unknown_prompts, "trace": switch.trace}))
    print("FINISHED", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--kill")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(args.workdir, args.out, args.kill, args.resume))
