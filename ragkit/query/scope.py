"""Restricting a query to some documents, in every stage.

An entity or relation counts only through chunks of the scoped documents. When
only some of its sources are in scope, its description is recomputed from the
in-scope chunks' extractions alone (no LLM summary), so that text derived from
other documents never reaches the context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragkit.core.extraction import ChunkExtraction, Fragment, entity_properties, relation_properties
from ragkit.core.keys import entity_key, relation_key
from ragkit.core.stores import Stores
from ragkit.errors import InvalidValueError
from ragkit.protocols.vector import matches_filter
from ragkit.query.items import EntityItem, RelationItem
from ragkit.schema import DocStatus


@dataclass
class Scope:
    doc_ids: set[str]
    chunk_ids: set[str]

    @property
    def vector_filter(self) -> dict[str, Any]:
        return {"doc_id": {"$in": sorted(self.doc_ids)}}


async def resolve_scope(
    stores: Stores, doc_ids: list[str] | None, doc_filter: Mapping[str, Any] | None
) -> Scope | None:
    """None when the query is not scoped. A filter matches document metadata."""
    if doc_ids is None and not doc_filter:
        return None
    records = []
    if doc_ids is not None:
        records = [r for r in await stores.doc_status.get(list(dict.fromkeys(doc_ids))) if r is not None]
    else:
        cursor = None
        while True:
            page = await stores.doc_status.list_page(DocStatus.PROCESSED, 500, cursor)
            records += page.items
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    if doc_filter:
        try:
            records = [r for r in records if matches_filter(r.metadata, doc_filter)]
        except InvalidValueError as exc:
            raise InvalidValueError(f"document filter: {exc}") from exc
    records = [r for r in records if r.status is DocStatus.PROCESSED]
    return Scope({r.id for r in records}, {c for r in records for c in r.chunk_ids})


class Restrictor:
    """Applies a scope to found entities and relations."""

    def __init__(self, stores: Stores, scope: Scope) -> None:
        self.stores = stores
        self.scope = scope
        self._extractions: dict[str, ChunkExtraction | None] = {}

    async def entities(self, items: list[EntityItem]) -> list[EntityItem]:
        out = []
        for item in items:
            props = await self._restrict(item.props, lambda ex: [
                Fragment(ex.chunk_id, e) for e in ex.entities if entity_key(e.name) == item.key
            ], lambda frags: entity_properties(item.key, frags))
            if props is not None:
                item.props = props
                out.append(item)
        return out

    async def relations(self, items: list[RelationItem]) -> list[RelationItem]:
        out = []
        for item in items:
            props = await self._restrict(item.props, lambda ex: [
                Fragment(ex.chunk_id, r) for r in ex.relations if relation_key(r.source, r.target) == item.key
            ], lambda frags: relation_properties(item.key, frags))
            if props is not None:
                item.props = props
                out.append(item)
        return out

    async def _restrict(self, props, fragments_of, merge) -> dict | None:
        sources = list(props.get("source_ids", []))
        inside = [c for c in sources if c in self.scope.chunk_ids]
        if not inside:
            return None
        if len(inside) == len(sources):
            return props
        frags = [f for ex in await self._load(inside) for f in fragments_of(ex)]
        return merge(frags) if frags else None

    async def _load(self, chunk_ids: list[str]) -> list[ChunkExtraction]:
        wanted = [c for c in chunk_ids if c not in self._extractions]
        for cid, rec in zip(wanted, await self.stores.extractions.get_many(wanted)):
            self._extractions[cid] = ChunkExtraction.model_validate(rec) if rec else None
        return [ex for c in chunk_ids if (ex := self._extractions[c]) is not None]
