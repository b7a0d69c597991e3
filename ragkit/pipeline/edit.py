"""Manual graph edits, made as edits of the facts the graph is computed from.

An entity's or relation's stored state is a pure function of the extraction
fragments of its source chunks (``merge``). An edit of the derived node or edge
alone would be undone by the next delete or repair, which recompute from the
fragments. So every edit here rewrites fragments, then lets ``GraphUpdater``
recompute what they touch, exactly as indexing does:

- ``create_entity`` / ``create_relation`` add a *manual chunk* (id ``manual-...``,
  doc id ``manual``) holding one fragment. Manual chunks belong to no document, so
  deleting documents never removes them. They have no chunk vector: their text is
  the fragment itself, which is embedded as the entity or relation already.
- ``edit_entity`` / ``edit_relation`` give every fragment of the element the new
  value. Identical lines merge into one, so the description is exactly the new
  one for as long as any source remains; documents indexed later add their lines.
- ``rename_entity`` / ``merge_entities`` rewrite names in the fragments of the
  source chunks. Fragments that then coincide in one chunk are combined the way
  extraction combines them; a relation between two merged entities would be a
  self-loop and is dropped, as extraction drops self-loops (its description is
  usually already a line of one of the two entities).
- ``delete_entity`` / ``delete_relation`` remove the fragments from their chunks.
- ``insert_custom_kg`` stores the KG's chunks as a document of their own (status
  processed), so deleting that document removes the KG like any other.

Made as a principal (``principal=``, every keyed request of ``ragkit serve``),
an edit sees the graph as that principal's reads do (``core/scope.py``): an
entity or relation none of whose sources it may read does not exist for it (the
same error as one that does not exist; creating one is allowed, as it would be
if there were none), only the fragments of chunks it may read are rewritten (a
hidden document's facts stay as they are), names, types and weights come from
the readable fragments, and what an edit returns is the element as the
principal's reads show it.

A relation's endpoints must be entities of its chunk (what lets delete work by
sources alone). Where an edit needs one, it adds a *blank* fragment (no type, no
description) that adds the source without voting on the type or adding a line;
blank fragments no relation needs any more are dropped.

Re-indexing a document (deleting and inserting it again, or recovering an
interrupted insert) extracts its chunks anew and so drops edits made to them;
manual chunks are not affected. Edits must not run concurrently with indexing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field

from ragkit.access import Principal
from ragkit.core.extraction import ChunkExtraction
from ragkit.core.scope import Restrictor, Scope, ScopedGraph, resolve_scope
from ragkit.core.keys import MANUAL_DOC, MANUAL_PREFIX, Pair, entity_key, relation_key
from ragkit.core.stores import Stores, writes
from ragkit.errors import ElementExistsError, ElementNotFoundError, GraphEditError
from ragkit.ids import digest
from ragkit.pipeline.extract import combine_extractions as combine_fragments
from ragkit.pipeline.edit_journal import EditJournal, finish_interrupted_edit, run_edit
from ragkit.pipeline.graph_update import GraphUpdater, embed_all
from ragkit.pipeline.index import chunk_meta, chunk_record
from ragkit.schema import Chunk, DocStatus, DocStatusRecord, Entity, Relation


Rewrite = Callable[[ChunkExtraction], ChunkExtraction]


# -- custom knowledge graphs ----------------------------------------------------


class CustomChunk(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1)
    id: str | None = None
    """How the KG's entities and relations name this chunk in ``source_ids``."""
    doc_id: str | None = None
    """Default: the KG's ``doc_id``."""
    file_path: str | None = None


class CustomEntity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    type: str = "entity"
    description: str = ""
    source_ids: list[str] = Field(default_factory=list)
    """Ids of the KG's chunks that state it; may be empty when the KG has one chunk."""


class CustomRelation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    keywords: str = ""
    description: str = ""
    strength: float = Field(default=1.0, ge=0)
    source_ids: list[str] = Field(default_factory=list)


class CustomKG(BaseModel):
    """Entities and relations written by hand or by another tool, with the text
    that supports them. Every fact cites chunks of this KG, so the KG is
    self-contained and deleting its document removes all of it."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str | None = None
    """Document of the chunks that name none; default: derived from their text."""
    chunks: list[CustomChunk] = Field(min_length=1)
    entities: list[CustomEntity] = Field(default_factory=list)
    relations: list[CustomRelation] = Field(default_factory=list)


class CustomKGReport(BaseModel):
    doc_ids: list[str]
    chunk_ids: list[str]
    """Stored ids of the KG's chunks, in the KG's order."""


# -- the editor ----------------------------------------------------------------------


class GraphEditor:
    def __init__(self, stores: Stores, updater: GraphUpdater, principal: Principal | None = None) -> None:
        self.stores = stores
        self.updater = updater
        self.principal = principal
        self._scope: Scope | None = None
        self._view: ScopedGraph | None = None

    async def _see_as_principal(self) -> None:
        """The start of every edit, under the writer lock: finish an edit that
        was cut short, then read the principal's scope (``None``: no
        principal, or one that may read everything)."""
        await finish_interrupted_edit(self.stores, self.updater)
        if self.principal is not None:
            self._scope = await resolve_scope(self.stores, None, None, self.principal)
        self._fresh_view()

    def _fresh_view(self) -> None:
        """Scoped reads are cached per view: a new one after every commit."""
        self._view = None if self._scope is None else ScopedGraph(self.stores.graph, Restrictor(self.stores, self._scope))

    async def _get_node(self, key: str) -> dict | None:
        if self._view is None:
            return await self.stores.graph.get_node(key)
        return (await self._view.get_nodes([key]))[0]

    async def _get_edge(self, pair: Pair) -> dict | None:
        if self._view is None:
            return await self.stores.graph.get_edge(*pair)
        return (await self._view.get_edges([pair]))[0]

    # -- entities ------------------------------------------------------------------

    @writes("edit")
    async def create_entity(self, name: str, type: str = "entity", description: str = "") -> dict:
        await self._see_as_principal()
        key = _key(name)
        if await self._get_node(key) is not None:
            raise ElementExistsError(
                f"entity {name!r} already exists; change it with edit_entity, "
                "or fold another entity into it with merge_entities"
            )
        cid = await self._manual_id("entity", key)
        entity = Entity(name=name.strip(), type=type.strip() or "entity", description=description.strip(), source_ids=[cid])
        await self._commit({cid: None}, {cid: ChunkExtraction(chunk_id=cid, entities=[entity])})
        return await self._node_props(key)

    @writes("edit")
    async def edit_entity(self, name: str, *, description: str | None = None, type: str | None = None) -> dict:
        update = _given(description=description, type=type)
        if update.get("type") == "":  # would leave fragments without a type
            raise GraphEditError("an entity type cannot be empty; give one, e.g. type='entity'")
        await self._see_as_principal()
        key, props = await self._node(name)
        olds = await self._load(props["source_ids"])
        # Blank fragments stay blank (so they can be dropped later), unless the
        # entity has nothing else to carry the new value.
        frags = [e for ex in olds.values() for e in ex.entities if entity_key(e.name) == key]
        include_blank = all(_blank(e) for e in frags)

        def edit(e: Entity) -> Entity:
            return e.model_copy(update=update) if include_blank or not _blank(e) else e

        await self._rewrite(olds, lambda ex: _map_entities(ex, {key}, edit))
        return await self._node_props(key)

    @writes("edit")
    async def rename_entity(self, old: str, new: str) -> dict:
        await self._see_as_principal()
        key, props = await self._node(old)
        new_key = _key(new)
        if new_key != key and await self._get_node(new_key) is not None:
            raise ElementExistsError(
                f"entity {new!r} already exists; to fold {old!r} into it use "
                f"merge_entities([{old!r}], {new!r})"
            )
        await self._rename(props["source_ids"], {key}, new.strip())
        return await self._node_props(new_key)

    @writes("edit")
    async def merge_entities(self, sources: list[str], target: str) -> dict:
        """Fold ``sources`` into ``target``: their sources, descriptions and
        relations move onto it; it keeps its name and type."""
        await self._see_as_principal()
        target_key = _key(target)
        target_props = await self._get_node(target_key)
        if target_props is None:
            raise ElementNotFoundError(
                f"merge target {target!r} does not exist; merge into an existing entity, "
                "then rename it with rename_entity"
            )
        keys = [k for k in dict.fromkeys(_key(s) for s in sources) if k != target_key]
        if not keys:
            raise GraphEditError(
                "merge_entities needs at least two different entities: "
                "name one or more entities to fold into the target"
            )
        found = [await self._get_node(k) for k in keys]
        missing = [k for k, p in zip(keys, found) if p is None]
        if missing:
            raise ElementNotFoundError(f"cannot merge entities that do not exist: {', '.join(missing)}")
        chunk_ids = sorted({c for p in found if p for c in p["source_ids"]})
        await self._rename(chunk_ids, set(keys), str(target_props["name"]), type=str(target_props["type"]))
        return await self._node_props(target_key)

    @writes("edit")
    async def delete_entity(self, name: str) -> None:
        """Remove the entity and its relations from every chunk that states them."""
        await self._see_as_principal()
        key, props = await self._node(name)

        def drop(ex: ChunkExtraction) -> ChunkExtraction:
            return ex.model_copy(update={
                "entities": [e for e in ex.entities if entity_key(e.name) != key],
                "relations": [r for r in ex.relations if key not in relation_key(r.source, r.target)],
            })

        await self._rewrite(await self._load(props["source_ids"]), drop)

    # -- relations -----------------------------------------------------------------

    @writes("edit")
    async def create_relation(
        self, source: str, target: str, keywords: str = "", description: str = "", strength: float = 1.0
    ) -> dict:
        """A relation between two existing entities; ``strength`` is its weight."""
        await self._see_as_principal()
        (a_key, a), (b_key, b) = await self._node(source), await self._node(target)
        if a_key == b_key:
            raise GraphEditError(f"a relation needs two different entities, got {source!r} twice")
        pair = relation_key(a_key, b_key)
        if await self._get_edge(pair) is not None:
            raise ElementExistsError(f"relation {source!r} - {target!r} already exists; change it with edit_relation")
        cid = await self._manual_id("relation", *pair)
        relation = Relation(
            source=str(a["name"]), target=str(b["name"]), keywords=keywords.strip(),
            description=description.strip(), strength=strength, source_ids=[cid],
        )
        await self._commit({cid: None}, {cid: _normalise(ChunkExtraction(chunk_id=cid, relations=[relation]))})
        return await self._edge_props(pair)

    @writes("edit")
    async def edit_relation(
        self, source: str, target: str, *,
        keywords: str | None = None, description: str | None = None, weight: float | None = None,
    ) -> dict:
        """``weight`` is the relation's total: it is split evenly over its sources,
        so deleting a source lowers it as deleting evidence should. Made as a
        principal: the total of the sources it may read, split over them."""
        update = _given(keywords=keywords, description=description, weight=weight)
        await self._see_as_principal()
        pair, props = await self._edge(source, target)
        if weight is not None:  # a weight alone is a change too
            update["strength"] = update.pop("weight") / len(props["source_ids"])

        def edit(ex: ChunkExtraction) -> ChunkExtraction:
            return ex.model_copy(update={"relations": [
                r.model_copy(update=update) if relation_key(r.source, r.target) == pair else r
                for r in ex.relations
            ]})

        await self._rewrite(await self._load(props["source_ids"]), edit)
        return await self._edge_props(pair)

    @writes("edit")
    async def delete_relation(self, source: str, target: str) -> None:
        await self._see_as_principal()
        pair, props = await self._edge(source, target)

        def drop(ex: ChunkExtraction) -> ChunkExtraction:
            return ex.model_copy(update={
                "relations": [r for r in ex.relations if relation_key(r.source, r.target) != pair]
            })

        await self._rewrite(await self._load(props["source_ids"]), drop)

    # -- custom knowledge graphs -------------------------------------------------

    @writes("edit")
    async def insert_custom_kg(self, kg: CustomKG) -> CustomKGReport:
        """Store the KG's chunks as documents and its facts as their extractions.
        Inserting the same KG again replaces its facts (no duplicate weights)."""
        await finish_interrupted_edit(self.stores, self.updater)
        chunks, refs = self._custom_chunks(kg)
        records = _custom_extractions(kg, chunks, refs)
        docs: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            docs.setdefault(chunk.doc_id, []).append(chunk)
        new_docs = await self._new_docs(docs)
        await self.stores.full_docs.upsert({d: _doc_record(docs[d]) for d in new_docs})
        unique = list({c.id: c for c in chunks}.values())
        await self.stores.chunks.upsert({c.id: chunk_record(c) for c in unique})
        vectors = await embed_all(self.updater.embedder, [c.content for c in unique])
        await self.stores.chunk_vectors.upsert([c.id for c in unique], vectors, [chunk_meta(c) for c in unique])
        await self._commit(await self._load(records), records)
        # Last, as indexing does: a document is processed only once all of it is durable.
        await self.stores.doc_status.upsert(_doc_status(d, docs[d]) for d in new_docs)
        return CustomKGReport(doc_ids=list(docs), chunk_ids=[c.id for c in chunks])

    def _custom_chunks(self, kg: CustomKG) -> tuple[list[Chunk], dict[str, str]]:
        """The KG's chunks as stored, and chunk reference -> stored id."""
        default_doc = kg.doc_id or "custom-doc-" + digest(*(c.content for c in kg.chunks))
        chunks: list[Chunk] = []
        refs: dict[str, str] = {}
        for order, c in enumerate(kg.chunks):
            doc = c.doc_id or default_doc
            chunk = Chunk(
                id="custom-chunk-" + digest(doc, c.content), doc_id=doc, content=c.content, order=order,
                tokens=self.updater.merger.tokenizer.count(c.content), file_path=c.file_path,
            )
            if c.id is not None:
                if c.id in refs:
                    raise GraphEditError(f"two chunks of the custom KG have the id {c.id!r}; chunk ids must be unique")
                refs[c.id] = chunk.id
            chunks.append(chunk)
        return chunks, refs

    async def _new_docs(self, docs: dict[str, list[Chunk]]) -> list[str]:
        """Documents to create; an existing one is accepted only with the same chunks."""
        new = []
        for doc_id, rec in zip(docs, await self.stores.doc_status.get(list(docs))):
            if rec is None:
                new.append(doc_id)
            elif set(rec.chunk_ids) != {c.id for c in docs[doc_id]}:
                raise ElementExistsError(
                    f"document {doc_id!r} already exists with other chunks; delete it first "
                    f"(rag.delete([{doc_id!r}])) or give the custom KG another doc_id"
                )
        return new

    # -- reading the graph -------------------------------------------------------

    async def _node(self, name: str) -> tuple[str, dict]:
        """The entity as the editor sees it; scoped, its ``source_ids`` are the
        readable ones, so a rewrite of them touches no hidden fragment."""
        key = _key(name)
        props = await self._get_node(key)
        if props is None:
            raise ElementNotFoundError(f"no entity named {name!r}; create it with create_entity")
        return key, props

    async def _edge(self, source: str, target: str) -> tuple[Pair, dict]:
        pair = relation_key(source, target)
        props = await self._get_edge(pair)
        if props is None:
            raise ElementNotFoundError(
                f"no relation between {source!r} and {target!r}; create it with create_relation"
            )
        return pair, props

    async def _node_props(self, key: str) -> dict:
        self._fresh_view()
        props = await self._get_node(key)
        assert props is not None, key
        return props

    async def _edge_props(self, pair: Pair) -> dict:
        self._fresh_view()
        props = await self._get_edge(pair)
        assert props is not None, pair
        return props

    # -- rewriting fragments -----------------------------------------------------

    async def _load(self, chunk_ids: Iterable[str]) -> dict[str, ChunkExtraction | None]:
        wanted = list(dict.fromkeys(chunk_ids))
        records = await self.stores.extractions.get_many(wanted)
        return {c: ChunkExtraction.model_validate(r) if r else None for c, r in zip(wanted, records)}

    async def _rewrite(self, olds: dict[str, ChunkExtraction | None], fn: Rewrite) -> None:
        await self._commit(olds, {c: _normalise(fn(ex)) for c, ex in olds.items() if ex is not None})

    async def _rename(self, chunk_ids: list[str], keys: set[str], name: str, type: str | None = None) -> None:
        def rename_entity(e: Entity) -> Entity:
            update: dict = {"name": name}
            if type is not None and not _blank(e):
                update["type"] = type
            return e.model_copy(update=update)

        def rename(ex: ChunkExtraction) -> ChunkExtraction:
            ex = _map_entities(ex, keys, rename_entity)
            return ex.model_copy(update={"relations": [
                r.model_copy(update={
                    "source": name if entity_key(r.source) in keys else r.source,
                    "target": name if entity_key(r.target) in keys else r.target,
                })
                for r in ex.relations
            ]})

        await self._rewrite(await self._load(chunk_ids), rename)

    async def _commit(self, olds: dict[str, ChunkExtraction | None], news: dict[str, ChunkExtraction]) -> None:
        """Store the new extractions and recompute everything old or new
        touches, all or nothing (``edit_journal``)."""
        gone = {c for c, ex in news.items() if c.startswith(MANUAL_PREFIX) and not ex.entities}
        kept = {c: ex for c, ex in news.items() if c not in gone}
        entities: set[str] = set()
        relations: set[Pair] = set()
        for ex in olds.values():
            if ex is not None:  # keys the chunk no longer states are recomputed without it
                entities.update(entity_key(e.name) for e in ex.entities)
                relations.update(relation_key(r.source, r.target) for r in ex.relations)
        journal = EditJournal(
            extractions={c: ex.model_dump(mode="json") for c, ex in kept.items()},
            chunks={c: chunk_record(self._manual_chunk(ex)) for c, ex in kept.items() if c.startswith(MANUAL_PREFIX)},
            removed=sorted(gone), entities=sorted(entities), relations=sorted(relations),
        )
        await run_edit(self.stores, self.updater, journal)

    def _manual_chunk(self, ex: ChunkExtraction) -> Chunk:
        """A manual chunk's text restates its fragments, so a query that cites it
        shows what was asserted, and it is kept in step with every edit."""
        lines = [_statement(f"{e.name} ({e.type})", e.description) for e in ex.entities if not _blank(e)]
        lines += [_statement(f"{r.source} - {r.target} ({r.keywords})", r.description) for r in ex.relations]
        text = "\n".join(lines)
        tokens = self.updater.merger.tokenizer.count(text)
        return Chunk(id=ex.chunk_id, doc_id=MANUAL_DOC, content=text, order=0, tokens=tokens)

    async def _manual_id(self, *parts: str) -> str:
        """Deterministic, but never reusing a live chunk (a renamed entity keeps
        the manual chunk that was created for its old name)."""
        for n in itertools.count():
            cid = MANUAL_PREFIX + digest(*parts, str(n))
            if await self.stores.chunks.get(cid) is None:
                return cid
        raise AssertionError("unreachable")


# -- pure helpers ------------------------------------------------------------------


def _key(name: str) -> str:
    key = entity_key(name)
    if not key:
        raise GraphEditError("an entity name must contain more than whitespace and quotes")
    return key


def _given(**values: str | float | None) -> dict:
    update = {k: v.strip() if isinstance(v, str) else v for k, v in values.items() if v is not None}
    if not update:
        raise GraphEditError(f"nothing to change: pass at least one of {', '.join(values)}")
    return update


def _blank(e: Entity) -> bool:
    """A fragment only edits make: extraction always gives a type."""
    return not e.type and not e.description


def _statement(subject: str, description: str) -> str:
    return f"{subject}: {description}" if description else subject


def _map_entities(ex: ChunkExtraction, keys: set[str], fn: Callable[[Entity], Entity]) -> ChunkExtraction:
    return ex.model_copy(update={"entities": [fn(e) if entity_key(e.name) in keys else e for e in ex.entities]})


def _normalise(ex: ChunkExtraction) -> ChunkExtraction:
    """The shape extraction gives a chunk: one fragment per entity and per pair,
    no self-loops, every endpoint an entity (blank if nothing more is known),
    and no blank entity that no relation needs."""
    have = {entity_key(e.name) for e in ex.entities}
    stubs = {
        entity_key(n): Entity(name=n.strip(), type="", source_ids=[ex.chunk_id])
        for r in ex.relations for n in (r.source, r.target) if entity_key(n) not in have
    }
    # Non-blank first: combining keeps the first fragment's name and type.
    entities = sorted([*ex.entities, *stubs.values()], key=_blank)
    out = combine_fragments(ex.chunk_id, [ex.model_copy(update={"entities": entities})])
    ends = {k for r in out.relations for k in relation_key(r.source, r.target)}
    return out.model_copy(update={
        "entities": [e for e in out.entities if not _blank(e) or entity_key(e.name) in ends]
    })


def _custom_extractions(kg: CustomKG, chunks: list[Chunk], refs: dict[str, str]) -> dict[str, ChunkExtraction]:
    def sources(ids: list[str], what: str) -> list[str]:
        if not ids:
            if len(chunks) == 1:
                return [chunks[0].id]
            raise GraphEditError(f"{what} names no source chunk; list the ids of its chunks in source_ids")
        unknown = [i for i in ids if i not in refs]
        if unknown:
            raise GraphEditError(
                f"{what} cites {', '.join(map(repr, unknown))}, which no chunk of the custom KG has as id"
            )
        return [refs[i] for i in ids]

    records = {c.id: ChunkExtraction(chunk_id=c.id) for c in chunks}
    for e in kg.entities:
        for cid in sources(e.source_ids, f"entity {e.name!r}"):
            entity = Entity(name=e.name.strip(), type=e.type.strip() or "entity", description=e.description.strip(), source_ids=[cid])
            records[cid].entities.append(entity)
    for r in kg.relations:
        for cid in sources(r.source_ids, f"relation {r.source!r} - {r.target!r}"):
            relation = Relation(**r.model_dump(exclude={"source_ids"}), source_ids=[cid])
            records[cid].relations.append(relation)
    return {c: _normalise(ex) for c, ex in records.items()}


def _doc_record(chunks: list[Chunk]) -> dict:
    return {
        "content": "\n\n".join(c.content for c in chunks),
        "file_path": next((c.file_path for c in chunks if c.file_path), None),
        "metadata": {"source": "custom_kg"},
    }


def _doc_status(doc_id: str, chunks: list[Chunk]) -> DocStatusRecord:
    record = _doc_record(chunks)
    return DocStatusRecord(
        id=doc_id, status=DocStatus.PROCESSED, chunk_ids=list(dict.fromkeys(c.id for c in chunks)),
        content_hash=digest(record["content"]), file_path=record["file_path"],
        content_length=len(record["content"]), metadata=record["metadata"],
    )
