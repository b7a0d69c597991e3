"""The whole pipeline on several combinations of backends, compared with the
embedded defaults: the same graph (nodes, edges, properties and sources), the
same ids in every store and the same retrieved chunks for every question and mode.

Combinations: ``RAGKIT_MATRIX=embedded,servers,mixed,postgres,usearch`` (default: all) selects;
``RAGKIT_MATRIX_REQUIRE`` lists those that must run: for them an unreachable
server is a failure, not a skip (CI sets it). Server addresses come from each
adapter's contract options (``RAGKIT_REDIS_URL``, ``RAGKIT_CHROMA_URL``,
``RAGKIT_NEO4J_URI``, ``RAGKIT_POSTGRES_URL``...), the same place the contract suite reads them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from ragkit.pipeline.check import check
from ragkit.plugins import get_registry
from ragkit.rag import RAG
from ragkit.schema import Document, QueryParam
from ragkit.sections.index import IndexConfig
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.contracts.options import contract_options
from ragkit.testing.recall import passage_text
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot

COMBOS: dict[str, dict[str, str]] = {
    "embedded": {},
    "servers": {"kv": "redis", "doc_status": "redis", "vector": "chroma-http", "graph": "neo4j"},
    "mixed": {"kv": "sqlite", "vector": "qdrant", "graph": "networkx"},
    "postgres": {"kv": "postgres", "doc_status": "postgres", "vector": "postgres", "graph": "postgres"},
    "usearch": {"vector": "usearch"},
}
MODES = ["local", "global", "hybrid", "naive", "mix", "ppr"]
EXACT = {
    "chroma-http": {"hnsw_ef_search": 1000, "hnsw_ef_construction": 1000},
    "postgres": {"hnsw_ef_search": 1000},
}
"""Chroma's HNSW is approximate and built by several threads, so with the default
search breadth its neighbours can vary from run to run; searching as wide as the
collection makes it exact, as the comparison with numpy's exact search needs
(pgvector's HNSW likewise)."""
N_QUESTIONS = 6


def _listed(var: str, default: str = "") -> set[str]:
    return {p.strip() for p in os.environ.get(var, default).split(",") if p.strip()}


SELECTED = _listed("RAGKIT_MATRIX", ",".join(COMBOS))
REQUIRED = _listed("RAGKIT_MATRIX_REQUIRE")


def test_matrix_selection_names_known_combinations():
    """A typo in RAGKIT_MATRIX or RAGKIT_MATRIX_REQUIRE must not silently run nothing."""
    assert (SELECTED | REQUIRED) <= set(COMBOS), f"known combinations: {sorted(COMBOS)}"


def settings_for(combo: str, tmp_path: Path) -> Settings:
    """Each backend by name, with its contract options (which skip when a
    server is unreachable: a failure for required combinations)."""
    values: dict[str, Any] = {"working_dir": tmp_path, "workspace": f"m{uuid.uuid4().hex[:10]}"}
    registry = get_registry()
    for kind, name in COMBOS[combo].items():
        if name not in registry.names(kind):
            message = f"{kind} adapter {name!r} is not installed (installed: {registry.names(kind)})"
            pytest.fail(message) if combo in REQUIRED else pytest.skip(message)
        try:
            options = contract_options(kind, name, tmp_path)
        except pytest.skip.Exception as exc:
            if combo in REQUIRED:
                pytest.fail(f"combination {combo!r} is required but {kind}:{name} is unreachable: {exc.msg}")
            raise
        values[kind] = {"name": name, "options": {**options, **EXACT.get(name, {})}}
    return Settings(**values)


@pytest.fixture(scope="module")
def corpus() -> tuple[list[Document], list[dict]]:
    """The candidate paragraphs of the first questions, one document each."""
    questions = load_musique()[2][:N_QUESTIONS]
    texts = sorted({passage_text(p["title"], p["paragraph_text"]) for q in questions for p in q["paragraphs"]})
    return [Document.from_text(t, file_path=f"p{i:03d}.txt") for i, t in enumerate(texts)], questions


async def run_pipeline(settings: Settings, docs: list[Document], questions: list[dict]) -> dict:
    """Index, query every mode, delete one document, check: what must agree."""
    rag = RAG(settings, llm=ReplayLLM(), embedder=HashEmbedder({"dimension": 64}), index=IndexConfig(llm_concurrency=4))
    try:
        async with rag:
            report = await rag.indexer().insert(docs)
            assert not report.failed and len(report.processed) == len(docs)
            retrieved = {}
            for q in questions:
                for mode in MODES:
                    result = await rag.aquery(q["question"], QueryParam(mode=mode, only_need_context=True))
                    retrieved[(q["id"], mode)] = [c["id"] for c in result.chunks]
            await rag.indexer().delete([docs[len(docs) // 2].id])
            problems = (await check(rag.stores)).problems
            assert problems == [], problems
            backends = {
                "kv": rag.stores.chunks.name, "doc_status": rag.stores.doc_status.name,
                "vector": rag.stores.chunk_vectors.name, "graph": rag.stores.graph.name,
            }
            return {"snapshot": await store_snapshot(rag.stores), "retrieved": retrieved, "backends": backends}
    finally:
        async with rag:  # leave nothing behind on shared servers
            for store in rag.stores.all():
                await store.drop()


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> dict:
    docs, questions = corpus
    return asyncio.run(run_pipeline(Settings(working_dir=tmp_path_factory.mktemp("embedded")), docs, questions))


@pytest.mark.parametrize("combo", [c for c in COMBOS if c != "embedded"])
def test_combination_gives_the_same_graph_and_retrieval_as_embedded(combo, corpus, reference, tmp_path):
    if combo not in SELECTED:
        pytest.skip(f"not in RAGKIT_MATRIX={','.join(sorted(SELECTED))}")
    docs, questions = corpus
    got = asyncio.run(run_pipeline(settings_for(combo, tmp_path), docs, questions))
    want = reference
    assert {k: got["backends"][k] for k in COMBOS[combo]} == COMBOS[combo]
    for part in ("nodes", "edges"):
        assert got["snapshot"][part].keys() == want["snapshot"][part].keys(), part
        for key, props in want["snapshot"][part].items():
            assert got["snapshot"][part][key] == props, (part, key)
    assert got["snapshot"] == want["snapshot"]
    for key, chunk_ids in want["retrieved"].items():
        assert got["retrieved"][key] == chunk_ids, key


def test_embedded_reference_is_meaningful(reference, corpus):
    """The comparison proves something: a real graph and real retrieval."""
    docs, _ = corpus
    snap = reference["snapshot"]
    assert len(snap["nodes"]) > len(docs) and len(snap["edges"]) > len(docs)
    assert all(reference["retrieved"].values())
    assert len(snap["full_docs"]) == len(docs) - 1
