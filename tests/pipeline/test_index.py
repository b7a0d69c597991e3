"""Indexing on the embedded defaults with the replay LLM (real recorded extractions)."""

from __future__ import annotations

import pytest

from ragkit.pipeline.check import check
from ragkit.pipeline.index import IndexConfig
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique

N_DOCS = 40


@pytest.fixture(scope="module")
def passages() -> list[Document]:
    corpus = load_musique()[0]
    return [Document.from_text(p["title"] + "\n" + p["text"]) for p in corpus[:N_DOCS]]


def make_rag(tmp_path, workspace: str = "default") -> tuple[RAG, ReplayLLM]:
    llm = ReplayLLM()
    rag = RAG(
        Settings(working_dir=tmp_path, workspace=workspace),
        llm=llm,
        embedder=HashEmbedder({"dimension": 32}),
        index=IndexConfig(llm_concurrency=4),
    )
    return rag, llm


async def snapshot(rag: RAG) -> dict:
    """Everything that must be equal between two ways of reaching one state."""
    s = rag.stores
    return {
        "nodes": {n.id: n.properties async for n in s.graph.nodes()},
        "edges": {e.key: e.properties async for e in s.graph.edges()},
        "chunks": sorted([k async for k in s.chunks.keys()]),
        "chunk_vectors": sorted([k async for k in s.chunk_vectors.ids()]),
        "entity_vectors": sorted([k async for k in s.entity_vectors.ids()]),
        "relation_vectors": sorted([k async for k in s.relation_vectors.ids()]),
        "extractions": sorted([k async for k in s.extractions.keys()]),
    }


async def test_insert_builds_graph_with_sources_and_passes_check(tmp_path, passages):
    rag, llm = make_rag(tmp_path)
    async with rag:
        report = await rag.indexer().insert(passages)
        assert len(report.processed) == N_DOCS and not report.failed
        assert report.llm["calls"]["extraction"] == report.chunks == N_DOCS
        assert llm.unknown_prompts == 0
        assert (await rag.astatus())["processed"] == N_DOCS
        snap = await snapshot(rag)
        assert len(snap["nodes"]) > N_DOCS and len(snap["edges"]) > N_DOCS
        chunk_ids = set(snap["chunks"])
        for props in [*snap["nodes"].values(), *snap["edges"].values()]:
            assert props["source_ids"] and set(props["source_ids"]) <= chunk_ids
        result = await check(rag.stores)
        assert result.problems == [] and result.ok


async def test_reinsert_is_a_noop_without_llm_calls(tmp_path, passages):
    rag, llm = make_rag(tmp_path)
    async with rag:
        await rag.indexer().insert(passages[:10])
        before = await snapshot(rag)
        calls = llm.calls
        report = await rag.indexer().insert(passages[:10])
        assert report.skipped == [d.id for d in passages[:10]] and report.processed == []
        assert llm.calls == calls
        assert await snapshot(rag) == before


async def test_delete_equals_fresh_index_of_the_rest(tmp_path, passages):
    docs = passages[:20]
    full, llm = make_rag(tmp_path / "a")
    async with full:
        await full.indexer().insert(docs)
        calls = llm.calls
        removed = [docs[3].id, docs[7].id, docs[12].id]
        assert sorted(await full.indexer().delete(removed)) == sorted(removed)
        assert llm.calls == calls, "delete must not call the LLM"
        after_delete = await snapshot(full)
        assert (await check(full.stores)).problems == []
    fresh, _ = make_rag(tmp_path / "b")
    async with fresh:
        await fresh.indexer().insert([d for d in docs if d.id not in removed])
        assert await snapshot(fresh) == after_delete


async def test_check_catches_a_corrupted_store_and_repairs_it(tmp_path, passages):
    rag, _ = make_rag(tmp_path)
    async with rag:
        await rag.indexer().insert(passages[:5])
        snap = await snapshot(rag)
        victim = snap["chunks"][0]
        await rag.stores.chunks.delete([victim])  # a chunk vanishes behind our back
        await rag.stores.entity_vectors.upsert(["ent-orphan"], [[1.0] * 32], [{"key": "x"}])
        report = await check(rag.stores)
        kinds = {p.kind for p in report.problems}
        assert {"missing chunks", "orphan chunk vector", "orphan entity vector"} <= kinds
        assert any(k.endswith("with missing sources") for k in kinds)
        assert not report.ok
        repaired = await check(rag.stores, rag.indexer().updater, repair=True)
        assert repaired.ok
        # The document was queued again; the next insert redoes it from the cache.
        await rag.indexer().insert([])
        assert (await check(rag.stores)).problems == []
