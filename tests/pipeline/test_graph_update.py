"""The graph update's working set: a row that recurs in many source chunks is
held once per update, so a text whose passages recur does not hold one copy
of the row per occurrence (a 50 MiB text ran out of memory that way)."""

from __future__ import annotations

from ragkit.pipeline.graph_update import Changes
from ragkit.rag import RAG
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder, ScriptedLLM
from ragkit.testing.snapshot import store_snapshot

ROWS = (
    "entity<|#|>Climate Dynamics<|#|>work<|#|>Climate Dynamics is a journal.\n"
    "entity<|#|>Springer<|#|>organization<|#|>Springer publishes Climate Dynamics.\n"
    "relation<|#|>Climate Dynamics<|#|>Springer<|#|>publisher<|#|>Springer publishes Climate Dynamics.\n"
    "<|COMPLETE|>"
)


def answer(request):
    if request.role == "extraction":
        return ROWS
    return '{"high_level_keywords": [], "low_level_keywords": []}'


async def test_a_recurring_row_is_held_once_and_the_state_is_unchanged(tmp_path):
    texts = [f"Issue {i}: Climate Dynamics is a journal published by Springer." for i in range(3)]
    async with RAG(Settings(working_dir=tmp_path), llm=ScriptedLLM(script=answer),
                   embedder=HashEmbedder({"dimension": 32})) as rag:
        await rag.ainsert(texts)
        before = await store_snapshot(rag.stores)
        updater = rag.indexer().updater
        entity, pair = "climate dynamics", ("climate dynamics", "springer")
        await updater.apply(Changes(entities={entity, "springer"}, relations={pair}))
        assert await store_snapshot(rag.stores) == before  # recomputed from the fragments: the same graph
        rows = [per_key[entity][0] for per_key in updater.entity_fragments.values() if entity in per_key]
        edges = [per_pair[pair][0] for per_pair in updater.relation_fragments.values() if pair in per_pair]
        assert len(rows) == len(edges) == 3  # one fragment from each source chunk...
        assert all(row is rows[0] for row in rows) and all(edge is edges[0] for edge in edges)  # ...one object
        node = await rag.stores.graph.get_node(entity)
        assert len(node["source_ids"]) == 3
