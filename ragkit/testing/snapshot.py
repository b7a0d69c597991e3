"""A comparable picture of everything a workspace holds.

Two ways of reaching one state (delete vs. fresh index, crash + resume vs. an
uninterrupted run, one backend vs. another) must give equal snapshots.
"""

from __future__ import annotations

from typing import Any

from pathlib import Path

from ragkit.core.stores import Stores
from ragkit.schema import DocStatus


async def store_snapshot(stores: Stores) -> dict[str, Any]:
    """Graph elements with their properties, entity resolution's blocks and
    links, and the ids in every other store."""
    statuses = {}
    for status in DocStatus:
        cursor = None
        while True:
            page = await stores.doc_status.list_page(status, 500, cursor)
            statuses.update({r.id: r.status.value for r in page.items})
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    alias_keys = sorted([k async for k in stores.aliases.keys()])
    return {
        "aliases": dict(zip(alias_keys, await stores.aliases.get_many(alias_keys))),
        "nodes": {n.id: n.properties async for n in stores.graph.nodes()},
        "edges": {e.key: e.properties async for e in stores.graph.edges()},
        "chunks": sorted([k async for k in stores.chunks.keys()]),
        "full_docs": sorted([k async for k in stores.full_docs.keys()]),
        "chunk_vectors": sorted([k async for k in stores.chunk_vectors.ids()]),
        "entity_vectors": sorted([k async for k in stores.entity_vectors.ids()]),
        "relation_vectors": sorted([k async for k in stores.relation_vectors.ids()]),
        "extractions": sorted([k async for k in stores.extractions.keys()]),
        "doc_status": statuses,
    }


async def full_snapshot(stores: Stores) -> dict[str, Any]:
    """``store_snapshot`` plus what it leaves out: vectors and their metadata,
    file paths, status records beyond the status, the LLM cache's roles and
    ``ragkit check``'s problems."""
    from ragkit.pipeline.check import check

    snap = await store_snapshot(stores)
    for name in ("chunk_vectors", "entity_vectors", "relation_vectors"):
        store = getattr(stores, name)
        ids = sorted([i async for i in store.ids()])
        snap[name] = {r.id: (r.vector, r.metadata) for r in await store.get(ids) if r is not None}
    paths = sorted([k async for k in stores.doc_paths.keys()])
    snap["doc_paths"] = dict(zip(paths, await stores.doc_paths.get_many(paths)))
    records = await stores.doc_status.get(list(snap["doc_status"]))
    snap["doc_status"] = {r.id: (r.status.value, r.chunk_ids, r.metadata, r.error) for r in records if r}
    keys = sorted([k async for k in stores.llm_cache.keys()])
    snap["llm_cache"] = {k: v["role"] for k, v in zip(keys, await stores.llm_cache.get_many(keys)) if v}
    snap["check_problems"] = [(p.kind, p.item) for p in (await check(stores)).problems]
    return snap


def differences(snap: dict[str, Any], reference: dict[str, Any]) -> list[str]:
    """The parts in which two ``full_snapshot``s differ (none: the same stores).
    The LLM cache is compared on its extraction entries: summary calls depend
    on how documents fell into batches, which the order they finish decides."""
    def extractions(s: dict[str, Any]) -> set[str]:
        return {k for k, role in s.get("llm_cache", {}).items() if role == "extraction"}

    out = [] if extractions(snap) == extractions(reference) else ["llm_cache (extraction entries)"]
    parts = sorted((set(snap) | set(reference)) - {"llm_cache"})
    return out + [name for name in parts if snap.get(name) != reference.get(name)]


async def folder_snapshot(workdir: Path, dimension: int, settings: Any = None) -> dict[str, Any]:
    """``full_snapshot`` of the embedded stores in ``workdir`` (vectors of
    ``dimension``), or of the stores ``settings`` name."""
    from ragkit.backends import build_stores
    from ragkit.settings import Settings

    stores = build_stores(settings or Settings(working_dir=workdir), dimension)
    await stores.open()
    try:
        return await full_snapshot(stores)
    finally:
        await stores.close()
