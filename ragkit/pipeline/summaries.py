"""Deferred summaries: one summary call per entity and relation per ``insert()``.

Why: an entity's state is recomputed from all its fragments whenever a commit
batch touches it. With a summary at every batch, an entity past the summary
threshold cost one LLM call per batch that added a line to it (hub entities,
touched by most batches, made ragkit's summary calls ~3x LightRAG's). Now an
insert's batches store the joined description lines, and the end of the
``insert()`` recomputes what its documents touched, with summaries: one call
per entity over the threshold, and the result is exactly what summarising at
every batch would have stored (the state stays a pure function of the
fragments, so delete and repair stay exact).

Crash safety: a document is committed ``processed`` with the
:data:`SUMMARY_PENDING` mark in its status metadata, and the mark is cleared
only after the summaries of what it touched are flushed. A run killed in
between leaves valid (unsummarised) descriptions that ``ragkit check``
accepts; the next ``recover()`` (every ``insert()`` starts with one) finds the
marked documents and finishes their summaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragkit.core.extraction import ChunkExtraction
from ragkit.core.keys import Pair, entity_key, relation_key
from ragkit.core.pacing import Pacer
from ragkit.core.stores import Stores
from ragkit.pipeline.graph_update import Changes, GraphUpdater
from ragkit.schema import DocStatus, DocStatusRecord, utcnow

SUMMARY_PENDING = "ragkit_summary_pending"
"""Status metadata key: this processed document's entities may wait for their summaries."""

PAGE = 8
"""Extractions read per store call (a page is decoded in one go)."""
KEYS = 2048
"""Entities (and relations) recomputed per graph update of the final pass."""


def mark_pending(record: DocStatusRecord) -> DocStatusRecord:
    return record.model_copy(update={"metadata": {**record.metadata, SUMMARY_PENDING: True}})


async def pending_documents(stores: Stores) -> list[DocStatusRecord]:
    """Processed documents whose summaries a run did not finish."""
    out: list[DocStatusRecord] = []
    cursor = None
    while True:
        page = await stores.doc_status.list_page(DocStatus.PROCESSED, 500, cursor)
        out += [r for r in page.items if r.metadata.get(SUMMARY_PENDING)]
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


async def finish_summaries(stores: Stores, updater: GraphUpdater, records: Sequence[DocStatusRecord],
                           progress: Callable[[str, int], None] | None = None) -> None:
    """Recompute, with summaries, every entity and relation these documents'
    chunks mention; then flush and clear the documents' marks. ``progress``
    hears ``summaries_planned`` (entities and relations to recompute) once and
    ``summaries_done`` after each slice: on a large document this pass takes
    minutes, and progress must not sit still."""
    progress = progress or (lambda event, n: None)
    if not records:
        return
    entities: set[str] = set()
    relations: set[Pair] = set()
    chunk_ids = list(dict.fromkeys(c for r in records for c in r.chunk_ids))
    pace = Pacer()  # the keys of a large insert are seconds of work: in slices (ragkit.core.pacing)
    for i in range(0, len(chunk_ids), PAGE):
        for rec in await stores.extractions.get_many(chunk_ids[i : i + PAGE]):
            await pace()
            if rec is not None:
                ex = ChunkExtraction.model_validate(rec)
                entities.update(entity_key(e.name) for e in ex.entities)
                relations.update(relation_key(r.source, r.target) for r in ex.relations)
    # A slice of keys at a time: memory holds one slice's fragments, not every
    # fragment of the insert (a large document's windows were bounded too).
    ents, rels = sorted(entities), sorted(relations)
    progress("summaries_planned", len(ents) + len(rels))
    for i in range(0, max(len(ents), len(rels)), KEYS):
        part = Changes(entities=set(ents[i : i + KEYS]), relations=set(rels[i : i + KEYS]))
        await updater.apply(part)
        await stores.flush()
        progress("summaries_done", len(part.entities) + len(part.relations))
    await stores.doc_status.upsert(
        r.model_copy(update={
            "metadata": {k: v for k, v in r.metadata.items() if k != SUMMARY_PENDING},
            "updated_at": utcnow(),
        })
        for r in records
    )
