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
from ragkit.testing.snapshot import store_snapshot

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
    return await store_snapshot(rag.stores)


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


@pytest.fixture(scope="module")
def eu_cluster() -> list[Document]:
    """14 passages, 12 of which mention the European Union: many shared entities."""
    corpus = load_musique()[0]
    return [Document.from_text(p["title"] + "\n" + p["text"]) for p in corpus[176:190]]


def record_node_writes(rag: RAG) -> list[str]:
    """Keys of every node written, observed on the real graph store."""
    written: list[str] = []
    upsert = rag.stores.graph.upsert_nodes

    async def spy(nodes):
        nodes = dict(nodes)
        written.extend(nodes)
        return await upsert(nodes)

    rag.stores.graph.upsert_nodes = spy  # type: ignore[method-assign]
    return written


@pytest.mark.parametrize("one_call", [True, False], ids=["batch", "one-by-one"])
async def test_batch_delete_rebuilds_each_shared_entity_once(tmp_path, eu_cluster, one_call):
    removed = [d.id for d in eu_cluster[1:11:2]]
    rag, llm = make_rag(tmp_path / "a")
    rag.index_config.merge.summary_min_fragments = 2  # every shared entity gets an LLM summary
    async with rag:
        await rag.indexer().insert(eu_cluster)
        assert (await rag.stores.graph.get_node("european union"))["source_ids"]
        written = record_node_writes(rag)
        calls = llm.calls
        if one_call:
            await rag.indexer().delete(removed)
        else:
            for doc_id in removed:
                await rag.indexer().delete([doc_id])
        rebuilds = written.count("european union")
        after = await snapshot(rag)
        assert (await check(rag.stores)).problems == []
    if one_call:
        assert rebuilds == 1
        assert len(written) == len(set(written)), "an entity was rebuilt more than once"
        # Summaries of the final state only (the replay answers summaries too).
        assert llm.calls - calls <= len(set(written))
    else:
        assert rebuilds > 1  # what batching saves: one rebuild per document that mentions it
    fresh, _ = make_rag(tmp_path / "b")
    fresh.index_config.merge.summary_min_fragments = 2
    async with fresh:
        await fresh.indexer().insert([d for d in eu_cluster if d.id not in removed])
        assert await snapshot(fresh) == after


@pytest.mark.parametrize("victim", range(12))
async def test_deleting_any_document_equals_fresh_index_of_the_others(tmp_path, eu_cluster, victim):
    docs = eu_cluster[:12]
    rag, _ = make_rag(tmp_path / "a")
    async with rag:
        await rag.indexer().insert(docs)
        await rag.indexer().delete([docs[victim].id])
        after = await snapshot(rag)
    fresh, _ = make_rag(tmp_path / "b")
    async with fresh:
        await fresh.indexer().insert([d for i, d in enumerate(docs) if i != victim])
        assert await snapshot(fresh) == after
