"""Budgets that mean the same in every mode: one chunk bound shared by every
source of chunks, a context that uses the token budget it is given, and
ranked lists fused by rank."""

from __future__ import annotations

import pytest

from ragkit.query.items import ChunkItem, fuse
from ragkit.schema import QueryParam

from .conftest import make_rag

GRAPH_MODES = ["local", "global", "hybrid", "mix", "ppr"]


def _chunk(cid: str) -> ChunkItem:
    return ChunkItem(cid, cid, "doc", None, "test")


def test_fusion_ranks_by_rank_and_lifts_what_several_lists_found():
    dense = [_chunk(x) for x in "abcd"]
    graph = [_chunk(x) for x in "ecfa"]
    fused = [c.id for c in fuse(dense, graph)]
    # found by both lists: a (1st, 4th), c (3rd, 2nd); then the rest by rank, ties in round-robin order
    assert fused == ["a", "c", "e", "b", "f", "d"]
    assert [c.id for c in fuse(dense)] == list("abcd")  # one list keeps its own order


@pytest.mark.parametrize("mode", [*GRAPH_MODES, "naive"])
async def test_chunk_top_k_bounds_the_chunks_from_every_source(indexed, questions, mode):
    """Graph-cited or walked chunks count against the same bound as dense hits
    (LightRAG's chunk_top_k): equal settings give contexts of equal size."""
    async with make_rag(indexed) as rag:
        for q in questions:
            wide = await rag.aquery(q["question"], mode=mode, only_need_context=True, chunk_top_k=40)
            bound = await rag.aquery(q["question"], mode=mode, only_need_context=True, chunk_top_k=4)
            assert len(bound.chunks) <= 4
            if len(wide.chunks) >= 4:
                assert len(bound.chunks) == 4, "the bound should be reached when material allows"


@pytest.mark.parametrize("mode", GRAPH_MODES)
@pytest.mark.parametrize("total", [2500, 4000, 8000])
async def test_a_context_uses_the_budget_it_is_given(indexed, questions, mode, total):
    """When found material was left out for the token budget, the prompt fills
    at least 85% of it; chunks come first, so a graph mode never shows fewer
    chunks than fit."""
    param = QueryParam(mode=mode, only_need_context=True, chunk_top_k=60, max_total_tokens=total)
    bound = 0
    async with make_rag(indexed) as rag:
        for q in questions:
            result = await rag.aquery(q["question"], param)
            meta = result.metadata
            used = meta["tokens"]["prompt_total"]
            assert used <= total
            if meta["chunks_left_out"] or meta["truncated"]["entities"] or meta["truncated"]["relations"]:
                bound += 1
                assert used >= 0.85 * total, f"{mode} at {total}: {used} tokens used"
            for item in [*result.entities, *result.relations]:  # still no claim without its evidence
                assert {c["id"] for c in result.chunks} & set(item["source_ids"])
    assert bound, f"{mode} at {total}: no question had more material than budget; the test proves nothing"


async def test_at_a_small_budget_chunks_come_before_graph_rows(indexed, questions):
    """The graph sections get what the chunks leave: at a budget that holds only
    some chunks, mix gives its chunks about as much room as naive does."""
    async with make_rag(indexed) as rag:
        for q in questions:
            mix = await rag.aquery(q["question"], mode="mix", only_need_context=True, max_total_tokens=1500)
            naive = await rag.aquery(q["question"], mode="naive", only_need_context=True, max_total_tokens=1500)
            assert mix.chunks and mix.metadata["tokens"]["chunks"] >= 0.8 * naive.metadata["tokens"]["chunks"]


def test_a_hub_row_too_long_for_what_is_left_is_shown_cut_and_the_rest_still_shown():
    """A hub's merged description can be longer than what its section has
    left: the rows after it are still taken (it is passed over, not the end of
    the section), and it is shown cut at a word, marked, to fill the section."""
    from ragkit.query.context import CUT_MARK, Budget, build_context
    from ragkit.query.items import EntityItem
    from ragkit.tokenizer import TiktokenTokenizer

    chunk = ChunkItem("c1", "Alpha met Beta in Gamma.", "d1", "a.txt", "chunk_vectors")
    small = [EntityItem({"name": n, "type": "person", "description": f"{n} is a person.", "source_ids": ["c1"]},
                        "entity_vectors", key=n.lower()) for n in ("Alpha", "Beta")]
    hub = EntityItem({"name": "Gamma", "type": "place", "source_ids": ["c1"],
                      "description": " ".join(f"Gamma fact number {i}." for i in range(2000))},
                     "entity_vectors", key="gamma")
    last = EntityItem({"name": "Delta", "type": "place", "description": "Delta is near Gamma.", "source_ids": ["c1"]},
                      "entity_vectors", key="delta")
    budget = Budget(entity_tokens=600, relation_tokens=600, total_tokens=5000, fixed_tokens=100)
    context = build_context([*small, hub, last], [], [chunk], TiktokenTokenizer(), budget)
    shown = {e.key: e.props["description"] for e in context.entities}
    assert list(shown) == ["alpha", "beta", "gamma", "delta"]  # rank order kept, the row after the hub shown
    assert shown["gamma"].endswith(CUT_MARK) and shown["gamma"].startswith("Gamma fact number 0.")
    assert len(shown["gamma"]) < len(hub.props["description"])
    assert 0.85 * 600 <= context.tokens["entities"] <= 600
    assert hub.props["description"].startswith("Gamma fact number 0.") and not hub.props["description"].endswith(CUT_MARK)


@pytest.mark.parametrize("mode", ["local", "global", "hybrid"])
async def test_a_graph_mode_keeps_the_questions_nearest_chunks_as_a_floor(indexed, questions, mode):
    """A graph mode fuses the chunks its items come from with the question's
    nearest chunks: it never ranks worse than dense retrieval in the same
    chunk bound. The nearest chunk is in every graph mode's context."""
    async with make_rag(indexed) as rag:
        for q in questions:
            naive = await rag.aquery(q["question"], mode="naive", only_need_context=True, chunk_top_k=20)
            graph = await rag.aquery(q["question"], mode=mode, only_need_context=True, chunk_top_k=20)
            top = naive.chunks[0]["id"]
            assert top in {c["id"] for c in graph.chunks}
            assert "chunk_vectors" in {c["stage"] for c in graph.chunks}
