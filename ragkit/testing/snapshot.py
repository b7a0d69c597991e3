"""A comparable picture of everything a workspace holds.

Two ways of reaching one state (delete vs. fresh index, crash + resume vs. an
uninterrupted run, one backend vs. another) must give equal snapshots.
"""

from __future__ import annotations

from typing import Any

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
