"""A migration's memory does not grow with the workspace: the peak of what
Python allocates during ``RAG.migrate`` (``tracemalloc``) copying a workspace
of N documents and one of 4N, in pages of 16 records, to the servers (whose
stores keep nothing in the process) differ by less than the slack below.

The source is embedded and opened before the measure: its numpy and networkx
stores hold the whole workspace in memory by design, before any copy; what
the copy adds is a page at a time, and the scans' id snapshots of those stores
(a reference per record, the in-memory stores' own way to scan safely).
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import uuid
from pathlib import Path

from test_backend_matrix import settings_for
from test_migrate import drop_all

from ragkit.rag import RAG
from ragkit.settings import Settings

N = 30
BATCH = 16
SHARE = 0.25
"""The peak may grow by this share of what the larger workspace holds more
(its records as JSON, its vectors as the lists a page carries): a copy that
kept what it copied would grow by all of it."""


def documents(n: int, seed: str) -> list[str]:
    """Distinct documents of several named things each (entities and relations for the offline LLM)."""
    return [
        f"Doc {seed}{i}. Alice Walker{i} met Bob Stone{i} in Paris{i}. Bob Stone{i} works at Acme{i} Corp in London{i}. "
        f"Carol Reed{i} founded Initech{i} in Austin{i} with Dave Hill{i}, who studied at Oxford{i} University."
        for i in range(n)
    ]


def peak_of_migrate(source: Settings, target: Settings) -> int:
    async def run() -> int:
        async with RAG(source) as rag:
            await rag.aopen()
            tracemalloc.start()
            try:
                report = await rag.amigrate(target, batch=BATCH)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert report.records == report.copied and report.records["graph:nodes"] > 0
            return peak

    return asyncio.run(run())


def held(settings: Settings) -> int:
    """Bytes of what a workspace holds, as a copy carries it (JSON records, float lists)."""

    async def run() -> int:
        size = 0
        async with RAG(settings) as rag:
            for store in rag.stores.all():
                if hasattr(store, "get_many"):
                    size += sum([len(json.dumps(await store.get(k))) async for k in store.keys()])
                elif hasattr(store, "records"):
                    size += sum([len(page) * (32 * store.dimension + 200) async for page in store.records(256)])
            size += sum([len(json.dumps(n.properties)) async for n in rag.stores.graph.nodes()])
            size += sum([len(json.dumps(e.properties)) async for e in rag.stores.graph.edges()])
        return size

    return asyncio.run(run())


def fresh(settings: Settings) -> Settings:
    return settings.model_copy(update={"workspace": f"mem{uuid.uuid4().hex[:8]}"})


def test_peak_memory_of_a_migration_does_not_grow_with_the_workspace(tmp_path: Path):
    servers = settings_for("servers", tmp_path / "servers")
    small, large = Settings(working_dir=tmp_path / "small"), Settings(working_dir=tmp_path / "large")
    with RAG(small) as rag:
        rag.insert(documents(N, "s"))
    with RAG(large) as rag:
        rag.insert(documents(4 * N, "l"))
    targets = [fresh(servers) for _ in range(3)]
    try:
        peak_of_migrate(small, targets[0])  # a first copy imports the clients' modules: not measured
        peaks = {"N": peak_of_migrate(small, targets[1]), "4N": peak_of_migrate(large, targets[2])}
        more = held(large) - held(small)
        print(f"peak traced memory of a migrate: {peaks}; the larger workspace holds {more} bytes more")
        assert peaks["4N"] - peaks["N"] < SHARE * more, (peaks, more)
    finally:
        for target in targets:
            asyncio.run(drop_all(target))
