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
