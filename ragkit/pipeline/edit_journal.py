"""All or nothing for graph edits: a journal that the next write finishes.

A graph edit (``ragkit.pipeline.edit``) writes several stores: the rewritten
extractions, the manual chunks, then the entities and relations it recomputes
from them, with their vectors. Cut short between two of those writes (a kill,
a full disk, a model error while embedding), the graph would disagree with the
extractions it is computed from, and running the edit again would not mend it:
the extractions already say the new thing, so the edit finds nothing to change
(a merge finds its sources gone, a create finds its chunk taken).

So an edit first stores, and flushes, what it is about to do: the journal, one
record in the extractions store under :data:`JOURNAL_KEY` (it states no entity
or relation, so readers of extractions see nothing in it). Then it makes its
writes, flushes, and deletes the journal. Every later write (an edit, an
insert's recovery, a delete, ``check --repair``) first calls
:func:`finish_interrupted_edit`, which makes the journal's writes again: each
is idempotent (the recomputed elements are a pure function of the extractions,
and an element is written after its vector, ``graph_update``), so finishing
twice, or finishing an edit that had completed all but the journal's removal,
gives the same stores.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ragkit.core.extraction import ChunkExtraction
from ragkit.core.stores import Stores
from ragkit.pipeline.graph_update import Changes, GraphUpdater

JOURNAL_KEY = "ragkit-edit-journal"


class EditJournal(BaseModel):
    """What an edit writes: enough to make every write again."""

    model_config = ConfigDict(extra="forbid")

    extractions: dict[str, dict]
    """chunk id -> its new extraction (JSON)"""
    chunks: dict[str, dict]
    """manual chunk id -> its record (its text restates its fragments)"""
    removed: list[str]
    """manual chunks the edit leaves empty: deleted"""
    entities: list[str]
    """entity keys to recompute (those the old extractions stated too)"""
    relations: list[tuple[str, str]]

    def changes(self) -> Changes:
        changes = Changes(removed_chunks=set(self.removed))
        changes.entities.update(self.entities)
        changes.relations.update(tuple(p) for p in self.relations)  # type: ignore[misc]
        for record in self.extractions.values():
            changes.add_extraction(ChunkExtraction.model_validate(record))
        return changes


async def run_edit(stores: Stores, updater: GraphUpdater, journal: EditJournal) -> None:
    """Journal first (durable before any other write), then the writes."""
    await stores.extractions.upsert({JOURNAL_KEY: {"edit": journal.model_dump(mode="json")}})
    await stores.extractions.flush()
    await _apply(stores, updater, journal)


async def finish_interrupted_edit(stores: Stores, updater: GraphUpdater) -> bool:
    """Make the writes of an edit that was cut short; whether there was one.
    Called under the writer lock, before a write of any other kind."""
    record = await stores.extractions.get(JOURNAL_KEY)
    if record is None:
        return False
    await _apply(stores, updater, EditJournal.model_validate(record["edit"]))
    return True


async def interrupted_edit(stores: Stores) -> bool:
    return await stores.extractions.get(JOURNAL_KEY) is not None


async def _apply(stores: Stores, updater: GraphUpdater, journal: EditJournal) -> None:
    await stores.extractions.upsert(journal.extractions)
    await stores.chunks.upsert(journal.chunks)
    await updater.apply(journal.changes())
    await stores.extractions.delete(journal.removed)
    await stores.chunks.delete(journal.removed)
    await stores.flush()
    await stores.extractions.delete([JOURNAL_KEY])
    await stores.extractions.flush()
