"""Restricting a read to some documents, in every stage.

A scope comes from a request's ``doc_ids`` / ``doc_filter`` and from the
principal it is made for (``ragkit.access``): the documents the principal may
read, narrowed by the request's own choice, never widened. Only processed
documents are in a scope.

An entity or relation counts only through chunks of the scoped documents (and
manual chunks, the facts graph edits assert: they carry no access list, so, like
a document without one, every scope holds them). When
only some of its sources are in scope, its description is recomputed from the
in-scope chunks' extractions alone (no LLM summary), so that text derived from
other documents never reaches the context. ``ScopedGraph`` (below) applies
this to every graph read. The query side (``query/search.py``), the graph reads
(``query/graph_read.py``) and the export (``pipeline/export.py``) share it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from ragkit import ids
from ragkit.access import Principal, allows
from ragkit.core.extraction import Fragment, entity_properties, relation_properties
from ragkit.core.keys import MANUAL_DOC, Pair, entity_key, is_manual
from ragkit.core.stores import Stores
from ragkit.errors import InvalidValueError
from ragkit.protocols import DocStatusStore, GraphStore
from ragkit.protocols.vector import matches_filter
from ragkit.schema import DocStatus, DocStatusRecord, Entity, Relation

_PAGE = 500


@dataclass
class Scope:
    doc_ids: AbstractSet[str]
    chunk_ids: AbstractSet[str]
    """Read-only sets (a kept scope's are the keys of dicts it copied)."""
    owners: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """chunk id -> (doc id, file path) of an in-scope document that holds it:
    chunk ids come from content, so two documents may share one, and the chunk
    record names only the last one written."""

    def holds(self, chunk_id: str) -> bool:
        """Whether the scope reads this chunk: one of its documents', or a manual one."""
        return chunk_id in self.chunk_ids or is_manual(chunk_id)

    def owner(self, chunk_id: str) -> tuple[str, str | None] | None:
        """The in-scope (doc id, file path) a chunk is attributed to, if any."""
        found = self.owners.get(chunk_id)
        return found if found is not None or not is_manual(chunk_id) else (MANUAL_DOC, None)

    @cached_property
    def key(self) -> str:
        """Names the scope in cache keys: answers are kept per scope."""
        return ids.digest("scope", *sorted(self.doc_ids))

    @classmethod
    def of(cls, records: list[DocStatusRecord]) -> Scope:
        owners: dict[str, tuple[str, str | None]] = {}
        for record in sorted(records, key=lambda r: r.id):
            for cid in record.chunk_ids:
                owners.setdefault(cid, (record.id, record.file_path))
        return cls({r.id for r in records}, set(owners), owners)

    def own(self, chunks: list[Any]) -> list[Any]:
        """The chunks in scope, each attributed to an in-scope document."""
        out = []
        for chunk in chunks:
            owner = self.owner(chunk.id)
            if owner is None:
                continue
            if chunk.doc_id not in self.doc_ids:
                chunk.doc_id, chunk.file_path = owner
            out.append(chunk)
        return out


async def all_records(stores: Stores, status: DocStatus | None = None) -> list[DocStatusRecord]:
    records: list[DocStatusRecord] = []
    cursor = None
    while True:
        page = await stores.doc_status.list_page(status, _PAGE, cursor)
        records += page.items
        if page.next_cursor is None:
            return records
        cursor = page.next_cursor


async def resolve_scope(
    stores: Stores, doc_ids: list[str] | None, doc_filter: Mapping[str, Any] | None,
    principal: Principal | None = None,
) -> Scope | None:
    """None when the read is not restricted. A filter matches document metadata.

    With a principal, the scope is the processed documents it may read, narrowed
    by ``doc_ids`` and ``doc_filter``; a principal that may read every document
    in the workspace (of any status: one being committed shows in the graph
    already) reads unrestricted, exactly as without one. A principal's own
    scope (no ``doc_ids``, no filter) is kept while the records stay as they
    are (``ReadableScopes``)."""
    if principal is None and doc_ids is None and not doc_filter:
        return None
    if principal is not None and doc_ids is None and not doc_filter:
        return await ReadableScopes.of(stores.doc_status).scope(stores, principal)
    return await _resolve(stores, doc_ids, doc_filter, principal)


async def _resolve(
    stores: Stores, doc_ids: list[str] | None, doc_filter: Mapping[str, Any] | None,
    principal: Principal | None,
) -> Scope | None:
    """``resolve_scope`` from the records as they are now."""
    if doc_ids is not None:
        records = [r for r in await stores.doc_status.get(list(dict.fromkeys(doc_ids))) if r is not None]
    elif principal is not None:
        records = await all_records(stores)
    else:
        records = await all_records(stores, DocStatus.PROCESSED)
    if principal is not None:
        readable = [r for r in records if allows(r.access, principal)]
        if doc_ids is None and not doc_filter and len(readable) == len(records):
            return None
        records = readable
    if doc_filter:
        try:
            records = [r for r in records if matches_filter(r.metadata, doc_filter)]
        except InvalidValueError as exc:
            raise InvalidValueError(f"document filter: {exc}") from exc
    return Scope.of([r for r in records if r.status is DocStatus.PROCESSED])


class ReadableScopes:
    """The scopes of principals reading without ``doc_ids`` or a filter, kept
    per doc-status store and followed from write to write: without them, every
    query made as a principal would read every status record, a cost that
    grows with the workspace.

    While the store's generation ([doc_status.generation.every-write]) stays,
    a kept scope is used as it is. When it moved, the records changed since
    (``DocStatusStore.changes_since``, [doc_status.changes.every-write]) are
    applied to every kept principal: one changed record costs one lookup, not
    a listing. Without a change feed (``None``: the adapter has none, or not
    from that far back) everything kept is dropped and read again. A store
    without a generation keeps nothing.

    Why this stays true to the records: the generation is read *before* the
    records (the full listing, or the changes), so whatever was read is at
    least as new as the generation kept; any write after it is named by the
    next ``changes_since`` and applied again (applying a record twice changes
    nothing). One lock per store: changes are applied once, in order.

    At most ``KEPT`` principals (user and groups) per store, holding at most
    ``KEPT_IDS`` document and chunk ids in all (about 180 bytes each: 26 MiB
    for a scope of 50,000 documents of two chunks), the least recently used
    dropped first; the one just resolved is always kept."""

    KEPT = 32
    KEPT_IDS = 1_000_000
    _by_store: weakref.WeakKeyDictionary[DocStatusStore, ReadableScopes] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self.generation: int | None = None
        self.scopes: OrderedDict[tuple[str, frozenset[str]], _Readable] = OrderedDict()
        self.all_ids: set[str] = set()
        """Every record's id (any status): a principal that reads them all reads unrestricted."""
        self._lock = asyncio.Lock()

    @classmethod
    def of(cls, store: DocStatusStore) -> ReadableScopes:
        """The scopes kept for this store instance (one per open workspace)."""
        kept = cls._by_store.get(store)
        if kept is None:
            kept = cls._by_store[store] = cls()
        return kept

    async def scope(self, stores: Stores, principal: Principal) -> Scope | None:
        async with self._lock:
            generation = await stores.doc_status.generation()
            if generation is None:
                self.reset(None)
                return await _resolve(stores, None, None, principal)
            if generation != self.generation:
                await self._follow(stores.doc_status, generation)
            key = (principal.user, principal.groups)
            kept = self.scopes.get(key)
            if kept is None:
                records = await all_records(stores)
                if not self.scopes:  # nothing else kept: the listing is the freshest count
                    self.generation, self.all_ids = generation, {r.id for r in records}
                kept = self.scopes[key] = _Readable(principal, records)
                while len(self.scopes) > 1 and (
                    len(self.scopes) > self.KEPT or sum(k.size for k in self.scopes.values()) > self.KEPT_IDS
                ):
                    self.scopes.popitem(last=False)
            self.scopes.move_to_end(key)
            return None if len(kept.ids) == len(self.all_ids) else kept.scope()

    def reset(self, generation: int | None) -> None:
        self.generation, self.scopes, self.all_ids = generation, OrderedDict(), set()

    async def _follow(self, store: DocStatusStore, generation: int) -> None:
        """Bring what is kept from ``self.generation`` to ``generation`` or later."""
        changes = None if self.generation is None or not self.scopes else await store.changes_since(self.generation)
        if changes is None:
            self.reset(generation)
            return
        self.all_ids.difference_update(changes.deleted)
        self.all_ids.update(r.id for r in changes.records)
        for kept in self.scopes.values():
            kept.apply(changes.records, changes.deleted)
        self.generation = changes.generation


class _Readable:
    """One principal's readable records, kept to follow the change feed: the
    ids it may read (any status) and its processed documents' chunks, from
    which its ``Scope`` is made (anew after a change: a query holding the
    previous one keeps reading that)."""

    def __init__(self, principal: Principal, records: Iterable[DocStatusRecord]) -> None:
        self.principal = principal
        self.ids: set[str] = set()
        self.docs: dict[str, tuple[str | None, tuple[str, ...]]] = {}
        """Readable processed documents: id -> (file path, chunk ids)."""
        self.owners: dict[str, tuple[str, str | None]] = {}
        """As ``Scope.owners``: each chunk's least document id holding it."""
        self.holders: dict[str, int] = {}
        """How many readable processed documents hold each chunk."""
        self._scope: Scope | None = None
        self.apply(records, ())

    @property
    def size(self) -> int:
        return len(self.docs) + len(self.owners)

    def scope(self) -> Scope:
        if self._scope is None:
            # Copies of the two dicts, their keys as the id sets: a dict's copy
            # clones its table, where a set built from it hashes every key
            # again (2 to 4 times the time at 100,000 ids).
            docs, owners = self.docs.copy(), self.owners.copy()
            self._scope = Scope(docs.keys(), owners.keys(), owners)
        return self._scope

    def apply(self, records: Iterable[DocStatusRecord], deleted: Iterable[str]) -> None:
        for id in deleted:
            self._remove(id)
        for record in records:
            self._remove(record.id)
            if allows(record.access, self.principal):
                self.ids.add(record.id)
                if record.status is DocStatus.PROCESSED:
                    self._add(record)

    def _add(self, record: DocStatusRecord) -> None:
        chunks = tuple(dict.fromkeys(record.chunk_ids))
        self.docs[record.id] = (record.file_path, chunks)
        for cid in chunks:
            self.holders[cid] = self.holders.get(cid, 0) + 1
            owner = self.owners.get(cid)
            if owner is None or record.id < owner[0]:
                self.owners[cid] = (record.id, record.file_path)
        self._scope = None

    def _remove(self, id: str) -> None:
        self.ids.discard(id)
        doc = self.docs.pop(id, None)
        if doc is None:
            return
        self._scope = None
        for cid in doc[1]:
            left = self.holders[cid] - 1
            if not left:
                del self.holders[cid], self.owners[cid]
                continue
            self.holders[cid] = left
            if self.owners[cid][0] == id:  # rare: chunks shared by documents; find the next owner
                self.owners[cid] = min((d, path) for d, (path, chunks) in self.docs.items() if cid in chunks)


@dataclass
class Mentioned:
    """The entities and relations the extractions of one side of a scope
    mention (``Restrictor.mentioned``)."""

    entities: set[str]
    relations: set[Pair]
    inside: bool
    """True: the in-scope chunks' extractions, so every visible item is here;
    False: the out-of-scope chunks', so every item with a source out of scope is."""


class Restrictor:
    """Applies a scope to graph properties: an entity's or relation's as its
    in-scope sources give them, or ``None`` when it has none."""

    def __init__(self, stores: Stores, scope: Scope) -> None:
        self.stores = stores
        self.scope = scope
        self._extractions: dict[str, _Rows | None] = {}

    async def mentioned(self, inside: bool | None = None) -> Mentioned:
        """What one side of the scope mentions: the in-scope chunks'
        extractions, or the out-of-scope ones' (every other stored extraction:
        other documents', of any status, and manual edits', which name more
        than needed, as the scope holds them). An item is
        recomputed exactly when it has sources on both sides, so either side
        names every such item; by default the smaller one is read."""
        chunk_ids = self.scope.chunk_ids
        if inside is None:
            inside = len(chunk_ids) <= await self.stores.extractions.count() - len(chunk_ids)
        if inside:  # kept: restricting an item reads its in-scope chunks again
            read = await self._load(sorted(chunk_ids))
        else:
            outside = sorted([c async for c in self.stores.extractions.keys() if c not in chunk_ids])
            read = [_Rows(c, rec) for c, rec in zip(outside, await self.stores.extractions.get_many(outside)) if rec]
        return Mentioned({k for rows in read for k in rows.entities}, {p for rows in read for p in rows.relations},
                         inside)

    async def entity_props(self, key: str, props: dict) -> dict | None:
        return await self._restrict(props, lambda rows: rows.fragments(Entity, rows.entities, key),
                                    lambda frags: entity_properties(key, frags))

    async def relation_props(self, pair: Pair, props: dict) -> dict | None:
        return await self._restrict(props, lambda rows: rows.fragments(Relation, rows.relations, pair),
                                    lambda frags: relation_properties(pair, frags))

    async def prefetch(self, props: Sequence[dict | None]) -> None:
        """Read at once the extractions that restricting all of ``props`` needs."""
        needed: list[str] = []
        for p in props:
            sources = list(p.get("source_ids", [])) if p else []
            inside = [c for c in sources if self.scope.holds(c)]
            if inside and len(inside) < len(sources):
                needed += inside
        await self._load(list(dict.fromkeys(needed)))

    async def _restrict(self, props: dict, fragments_of: Callable, merge: Callable) -> dict | None:
        """``props`` itself when every source is in scope (the same object:
        callers tell a recomputed description by identity)."""
        sources = list(props.get("source_ids", []))
        inside = [c for c in sources if self.scope.holds(c)]
        if not inside:
            return None
        if len(inside) == len(sources):
            return props
        frags = [f for ex in await self._load(inside) for f in fragments_of(ex)]
        return merge(frags) if frags else None

    async def _load(self, chunk_ids: list[str]) -> list[_Rows]:
        wanted = [c for c in chunk_ids if c not in self._extractions]
        if wanted:
            for cid, rec in zip(wanted, await self.stores.extractions.get_many(wanted)):
                self._extractions[cid] = _Rows(cid, rec) if rec else None
        return [rows for c in chunk_ids if (rows := self._extractions[c]) is not None]


_key = lru_cache(maxsize=1 << 16)(entity_key)
"""``entity_key``, remembered: names recur across chunks and queries."""


class _Rows:
    """One chunk's stored extraction, its rows by entity and by relation key.
    Why: an item is restricted by looking its key up, not by scanning every
    row, and only its rows are validated (an item of many chunks reads whole
    extractions for a few of their rows, as ``pipeline/graph_update.py`` does)."""

    def __init__(self, chunk_id: str, record: dict) -> None:
        self.chunk_id = chunk_id
        self.entities: dict[str, list[dict]] = {}
        self.relations: dict[Pair, list[dict]] = {}
        for row in record.get("entities", ()):
            self.entities.setdefault(_key(row["name"]), []).append(row)
        for row in record.get("relations", ()):
            a, b = _key(row["source"]), _key(row["target"])
            self.relations.setdefault((a, b) if a <= b else (b, a), []).append(row)

    def fragments(self, model: type[Entity] | type[Relation], rows: dict, key: str | Pair) -> list[Fragment]:
        return [Fragment(self.chunk_id, model.model_validate(row)) for row in rows.get(key, ())]


class ScopedGraph:
    """The graph as a scope sees it: the read methods the query and graph-read
    stages use (``get_nodes``, ``get_edges``, ``nodes_edges``, ``degrees``,
    ``edge_degrees``), answering only with what in-scope documents support.

    - A node or edge with no in-scope source does not exist.
    - One with some sources out of scope has the properties its in-scope sources
      give (``Restrictor``: description, type, keywords, weight, ``source_ids``
      recomputed from their extractions).
    - A node's edges are its visible edges, and its degree counts only those, so
      neither a ranking by degree nor a number shown counts an unreadable edge.
      An edge's sources are a subset of its endpoints' (``pipeline/extract.py``),
      so a visible edge's endpoints are visible.

    Every answer is kept for the view's life (one query): the stages ask for the
    same nodes and edges again and again. Edges and degrees need only the stored
    ``source_ids``; properties are recomputed only for what ``get_nodes`` /
    ``get_edges`` return. ``recomputed`` says which properties
    differ from the stored ones: their stored vectors embed text from other
    documents, so scoped searches score them afresh (``query/scoped.py``).
    """

    def __init__(self, graph: GraphStore, restrictor: Restrictor) -> None:
        self.graph = graph
        self.restrictor = restrictor
        self.scope = restrictor.scope
        self.chunk_ids = self.scope.chunk_ids  # the in-scope documents' chunks (manual ones: `scope.holds`)
        self._raw_nodes: dict[str, dict[str, Any] | None] = {}
        self._raw_edges: dict[Pair, dict[str, Any] | None] = {}
        self._nodes: dict[str, dict[str, Any] | None] = {}
        self._edges: dict[Pair, dict[str, Any] | None] = {}
        self._node_edges: dict[str, list[Pair] | None] = {}
        self.recomputed: set[str | Pair] = set()

    async def get_nodes(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        wanted = list(dict.fromkeys(k for k in keys if k not in self._nodes))
        if wanted:
            found = await self._read_nodes(wanted)
            await self.restrictor.prefetch(found)
            for key, props in zip(wanted, found):
                self._nodes[key] = props if self._whole(props) else await self._node(key, props)
        return [self._nodes[k] for k in keys]

    async def get_edges(self, pairs: Sequence[Pair]) -> list[dict[str, Any] | None]:
        pairs = [tuple(p) for p in pairs]  # type: ignore[misc]
        wanted = list(dict.fromkeys(p for p in pairs if p not in self._edges))
        if wanted:
            found = await self._read_edges(wanted)
            await self.restrictor.prefetch(found)
            for pair, props in zip(wanted, found):
                self._edges[pair] = props if self._whole(props) else await self._edge(pair, props)
        return [self._edges[p] for p in pairs]  # type: ignore[index]

    def _whole(self, props: dict[str, Any] | None) -> bool:
        """Missing, or every source in scope: nothing to restrict (the common
        case, decided here without a call per item; ``Restrictor`` does the rest)."""
        if props is None:
            return True
        sources = props.get("source_ids", ())
        return bool(sources) and all(self.scope.holds(c) for c in sources)

    async def nodes_edges(self, keys: Sequence[str]) -> list[list[Pair] | None]:
        """Each node's visible edges; ``None`` for a node not visible. Only the
        stored ``source_ids`` are checked here (a degree needs no description)."""
        wanted = list(dict.fromkeys(k for k in keys if k not in self._node_edges))
        if wanted:
            nodes = await self._read_nodes(wanted)
            raw = await self.graph.nodes_edges(wanted)
            pairs = list(dict.fromkeys(tuple(p) for edges in raw for p in edges or []))
            shown = {p for p, props in zip(pairs, await self._read_edges(pairs)) if self._visible(props)}
            for key, node, edges in zip(wanted, nodes, raw):
                self._node_edges[key] = None if not self._visible(node) else [
                    tuple(p) for p in edges or [] if tuple(p) in shown  # type: ignore[misc]
                ]
        return [self._node_edges[k] for k in keys]

    def _visible(self, props: dict[str, Any] | None) -> bool:
        return props is not None and any(self.scope.holds(c) for c in props.get("source_ids", []))

    async def _read_nodes(self, keys: list[str]) -> list[dict[str, Any] | None]:
        wanted = [k for k in keys if k not in self._raw_nodes]
        if wanted:
            self._raw_nodes.update(zip(wanted, await self.graph.get_nodes(wanted)))
        return [self._raw_nodes[k] for k in keys]

    async def _read_edges(self, pairs: list[Pair]) -> list[dict[str, Any] | None]:
        wanted = [p for p in pairs if p not in self._raw_edges]
        if wanted:
            self._raw_edges.update(zip(wanted, await self.graph.get_edges(wanted)))
        return [self._raw_edges[p] for p in pairs]

    async def degrees(self, keys: Sequence[str]) -> list[int]:
        return [len(edges or []) for edges in await self.nodes_edges(keys)]

    async def edge_degrees(self, pairs: Sequence[Pair]) -> list[int]:
        ends = list(dict.fromkeys(k for p in pairs for k in p))
        degree = dict(zip(ends, await self.degrees(ends)))
        return [degree[a] + degree[b] for a, b in pairs]

    async def restrict_nodes(self, nodes: Sequence[tuple[str, dict]]) -> list[dict | None]:
        """Scoped properties of nodes already read (an export streams them)."""
        await self.restrictor.prefetch([p for _, p in nodes])
        for key, props in nodes:
            if key not in self._nodes:
                self._nodes[key] = await self._node(key, props)
        return [self._nodes[k] for k, _ in nodes]

    async def restrict_edges(self, edges: Sequence[tuple[Pair, dict]]) -> list[dict | None]:
        await self.restrictor.prefetch([p for _, p in edges])
        for pair, props in edges:
            if pair not in self._edges:
                self._edges[pair] = await self._edge(pair, props)
        return [self._edges[p] for p, _ in edges]

    async def _node(self, key: str, props: dict) -> dict | None:
        scoped = await self.restrictor.entity_props(key, props)
        if scoped is not None and scoped is not props:
            self.recomputed.add(key)
        return scoped

    async def _edge(self, pair: Pair, props: dict) -> dict | None:
        scoped = await self.restrictor.relation_props(pair, props)
        if scoped is not None and scoped is not props:
            self.recomputed.add(pair)
        return scoped
