"""``ragkit check``: verify the invariants that tie the stores together.

1. Every processed document's chunks exist in the chunk KV and vector stores.
2. Every entity and relation has a vector and at least one existing source chunk.
3. No vector lacks its chunk, node or edge.
4. Document status agrees with the data (processed documents have their text,
   nothing is left mid-processing or mid-delete).
5. No graph edit was cut short (``edit_journal``).
6. Entity resolution's blocks and links name existing entities only.

``repair=True`` fixes what can be fixed without the LLM: orphan vectors are
deleted, missing vectors re-embedded, an interrupted edit finished, dangling sources dropped (recomputing the
entity or relation from the sources that remain), documents with missing
chunks are queued for re-indexing (pending), and alias links naming a gone
entity are rebuilt from the graph's entities (the user's splits kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragkit import ids
from ragkit.core.alias_index import AliasIndex
from ragkit.core.stores import Stores
from ragkit.pipeline.edit_journal import JOURNAL_KEY, finish_interrupted_edit, interrupted_edit
from ragkit.pipeline.graph_update import (
    Changes,
    GraphUpdater,
    write_entity_vectors,
    write_relation_vectors,
)
from ragkit.schema import LEGACY_DELETING_FLAG, DocStatus, utcnow


@dataclass
class Problem:
    kind: str
    item: str
    detail: str
    repaired: bool = False


@dataclass
class CheckReport:
    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(p.repaired for p in self.problems)

    def add(self, kind: str, item: str, detail: str) -> Problem:
        problem = Problem(kind, item, detail)
        self.problems.append(problem)
        return problem


async def _all(aiter) -> list:
    return [x async for x in aiter]


async def check(stores: Stores, updater: GraphUpdater | None = None, repair: bool = False) -> CheckReport:
    """Find (and with ``repair``, fix) inconsistencies; a repair holds the
    workspace's writer lock from its first read to its last write."""
    if not repair:
        return await _check(stores, updater, repair)
    async with stores.writing("repair"):
        return await _check(stores, updater, repair)


async def _check(stores: Stores, updater: GraphUpdater | None, repair: bool) -> CheckReport:
    report = CheckReport()
    interrupted = await interrupted_edit(stores)
    if interrupted:
        problem = report.add("interrupted edit", JOURNAL_KEY, "a graph edit was cut short; the next write, or --repair, finishes it")
        if repair and updater is not None:
            await finish_interrupted_edit(stores, updater)
            problem.repaired = True
    chunk_keys = set(await _all(stores.chunks.keys()))
    chunk_vec = set(await _all(stores.chunk_vectors.ids()))
    nodes = {n.id: n.properties async for n in stores.graph.nodes()}
    edges = {e.key: e.properties async for e in stores.graph.edges()}
    ent_vec = set(await _all(stores.entity_vectors.ids()))
    rel_vec = set(await _all(stores.relation_vectors.ids()))
    report.counts = {
        "chunks": len(chunk_keys), "chunk_vectors": len(chunk_vec), "entities": len(nodes),
        "relations": len(edges), "entity_vectors": len(ent_vec), "relation_vectors": len(rel_vec),
    }
    await _check_documents(stores, report, chunk_keys, chunk_vec, repair)
    dangling = Changes()
    missing_ent_vec = _check_sources(report, "entity", {k: (ids.entity_id(k), p) for k, p in nodes.items()}, ent_vec, chunk_keys, dangling)
    missing_rel_vec = _check_sources(report, "relation", {k: (ids.relation_id(*k), p) for k, p in edges.items()}, rel_vec, chunk_keys, dangling)
    orphans = {
        "chunk vector": (stores.chunk_vectors, chunk_vec - chunk_keys),
        "entity vector": (stores.entity_vectors, ent_vec - {ids.entity_id(k) for k in nodes}),
        "relation vector": (stores.relation_vectors, rel_vec - {ids.relation_id(*k) for k in edges}),
    }
    for kind, (store, extra) in orphans.items():
        found = [report.add(f"orphan {kind}", v, "no chunk, node or edge has this vector") for v in sorted(extra)]
        if repair and extra:
            await store.delete(extra)
            _mark(found)
    if repair:
        await _repair_graph(stores, updater, report, dangling, nodes, edges, missing_ent_vec, missing_rel_vec)
    if not interrupted or repair:  # an edit cut short wrote its links first: finishing it settles them
        await _check_aliases(stores, updater, report, repair)
    if repair:
        await stores.flush()
    return report


async def _check_aliases(stores: Stores, updater: GraphUpdater | None, report: CheckReport, repair: bool) -> None:
    """Alias blocks and links that name no entity (after the graph repair,
    which may delete some): rebuilt from the graph's entities."""
    index = updater.aliases if updater is not None and updater.aliases is not None else (
        AliasIndex(stores.aliases, stores.alias_splits))
    keys = [n.id async for n in stores.graph.nodes()]
    extra = await index.named() - set(keys)
    found = [report.add("orphan alias", k, "an alias block or link names this key, which is no entity")
             for k in sorted(extra)]
    if repair and extra:
        await index.rebuild(keys)
        _mark(found)


async def _check_documents(stores: Stores, report: CheckReport, chunk_keys: set, chunk_vec: set, repair: bool) -> None:
    cursor = None
    while True:
        page = await stores.doc_status.list_page(None, 500, cursor)
        texts = await stores.full_docs.get_many([r.id for r in page.items])
        for rec, text in zip(page.items, texts):
            if rec.status is DocStatus.DELETING or rec.metadata.get(LEGACY_DELETING_FLAG):
                report.add("interrupted delete", rec.id, "the next `ragkit index` run, or `ragkit delete` of it, finishes the delete")
            elif rec.status in (DocStatus.PROCESSING, DocStatus.PENDING):
                report.add("interrupted document", rec.id, f"status {rec.status.value}; the next `ragkit index` run finishes it")
            if rec.status is not DocStatus.PROCESSED:
                continue
            missing = [c for c in rec.chunk_ids if c not in chunk_keys or c not in chunk_vec]
            problem = None
            if text is None:
                problem = report.add("document without text", rec.id, "processed but its text is not stored")
            elif missing:
                problem = report.add("missing chunks", rec.id, f"{len(missing)} of {len(rec.chunk_ids)} chunks lack a record or vector")
            if problem and repair and text is not None:
                await stores.doc_status.upsert([rec.model_copy(update={"status": DocStatus.PENDING, "updated_at": utcnow()})])
                problem.repaired = True
                problem.detail += "; queued for re-indexing (run `ragkit index` again)"
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _check_sources(report, kind, items, vectors, chunk_keys, dangling: Changes) -> list:
    missing_vectors = []
    for key, (vec_id, props) in sorted(items.items()):
        sources = set(props.get("source_ids", []))
        gone = sources - chunk_keys
        if gone:
            report.add(f"{kind} with missing sources", str(key), f"{len(gone)} of {len(sources)} source chunks do not exist")
            dangling.removed_chunks |= gone
            (dangling.entities if kind == "entity" else dangling.relations).add(key)
        if vec_id not in vectors:
            report.add(f"{kind} without vector", str(key), "re-embedded by --repair")
            missing_vectors.append(key)
    return missing_vectors


async def _repair_graph(stores, updater, report, dangling, nodes, edges, missing_ent, missing_rel) -> None:
    if updater is not None and (dangling.entities or dangling.relations):
        await updater.apply(dangling)
        _mark([p for p in report.problems if p.kind.endswith("with missing sources")])
    embedder = updater.embedder if updater is not None else None
    if embedder is None:
        return
    nodes_now = await stores.graph.get_nodes(missing_ent)
    await write_entity_vectors(stores, embedder, [(k, p) for k, p in zip(missing_ent, nodes_now) if p])
    edges_now = await stores.graph.get_edges(missing_rel)
    await write_relation_vectors(stores, embedder, [(k, p) for k, p in zip(missing_rel, edges_now) if p])
    _mark([p for p in report.problems if p.kind.endswith("without vector")])


def _mark(problems: list[Problem]) -> None:
    for p in problems:
        p.repaired = True
