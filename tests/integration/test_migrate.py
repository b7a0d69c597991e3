"""``RAG.migrate`` along a chain of backend combinations: a workspace indexed on
the embedded defaults goes to the servers (Redis + Chroma server + the Bolt
graph server) and back to embedded stores, and at every step ``ragkit check``
is clean, every store holds what the first one held (records, vectors by
direction, graph properties, doc status with its access lists, the LLM cache)
and every question gets the same answer, context and sources in every mode.

The chain is ``LEGS``: a combination joins it once ``test_backend_matrix``
knows it (``COMBOS``), so the PostgreSQL leg (embedded -> postgres -> servers
-> embedded) runs as soon as the PostgreSQL plugin adds its combination there.
As in the matrix, ``RAGKIT_MATRIX_REQUIRE`` makes a leg's unreachable server a
failure (CI), not a skip; an optional leg that cannot run is left out.

The corpus is the matrix's (its first questions' paragraphs), on which the
server combination retrieves as the embedded one does; on another corpus a
score tie at a ``top_k`` cut can fall otherwise on Chroma (float32 cosines of
unit vectors) than on numpy, migration or not.

Also the refusals: a non-empty target (and ``force``), another embedder, a
workspace copied onto itself.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_backend_matrix import COMBOS, MODES, REQUIRED, settings_for

from ragkit.access import AccessList, Principal
from ragkit.backends import build_store
from ragkit.errors import MigrateError
from ragkit.pipeline.check import check
from ragkit.sections.index import IndexConfig
from ragkit.pipeline.migrate import PROGRESS_KEY, PROGRESS_NAMESPACE
from ragkit.protocols import KVStore, VectorStore
from ragkit.rag import RAG
from ragkit.schema import Document, QueryParam
from ragkit.settings import Settings
from ragkit.testing.recall import passage_text
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot

LEGS = ["embedded", "postgres", "servers", "embedded"]
"""Each leg migrates the previous leg's workspace into its own combination."""
OPTIONAL = {"postgres"}
"""Legs left out when their server is unreachable and RAGKIT_MATRIX_REQUIRE does not name them."""
N_QUESTIONS = 6
WIDE = 20_000
"""Chroma's HNSW search and construction breadth, past the entity count: its
search is then exhaustive, as numpy's, whatever order the copy inserted in."""
BATCH = 7
"""Small pages, so that every store is copied in many of them."""


def chain(tmp_path: Path) -> list[tuple[str, Settings]]:
    legs = []
    for n, combo in enumerate(LEGS):
        if combo not in COMBOS:
            if combo in REQUIRED:
                pytest.fail(f"combination {combo!r} is required but test_backend_matrix.COMBOS does not define it")
            continue  # its plugin has not landed: the chain runs without it
        try:
            settings = settings_for(combo, tmp_path / f"leg{n}")
            if settings.vector.name == "chroma-http":  # wider than the collection: an exact search
                settings.vector.options.update(hnsw_ef_search=WIDE, hnsw_ef_construction=WIDE)
            legs.append((combo, settings))
        except pytest.skip.Exception:
            if combo not in OPTIONAL:
                raise
    return legs


def corpus() -> tuple[list[Document], list[dict]]:
    """The candidate paragraphs of the first questions; every other one readable by ann only."""
    questions = load_musique()[2][:N_QUESTIONS]
    texts = sorted({passage_text(p["title"], p["paragraph_text"]) for q in questions for p in q["paragraphs"]})
    only_ann = AccessList(users=["ann"])
    docs = [Document.from_text(t, file_path=f"p{i:03d}.txt") for i, t in enumerate(texts)]
    docs = [d.model_copy(update={"access": only_ann}) if i % 2 else d for i, d in enumerate(docs)]
    return docs, questions


def rag_for(settings: Settings) -> RAG:
    return RAG(settings, llm=ReplayLLM(), index=IndexConfig(llm_concurrency=4))


async def observe(rag: RAG, questions: list[dict]) -> dict[str, Any]:
    """Everything that must survive a migration: answers first (they fill the
    LLM cache on the first leg and read it on the others), then the stores."""
    answers = {}
    for q in questions:
        for mode in MODES:
            for who in (None, Principal(user="bob")):
                r = await rag.aquery(q["question"], QueryParam(mode=mode), principal=who)
                answers[(q["id"], mode, who and who.user)] = {
                    "answer": r.answer,
                    "chunks": [c["id"] for c in r.chunks],
                    "entities": [e.get("entity") or e.get("name") for e in r.entities],
                    "relations": [(x.get("source"), x.get("target")) for x in r.relations],
                    "sources": [s.model_dump() for s in r.sources],
                }
    stores = rag.stores
    problems = (await check(stores)).problems
    kv = {s.namespace: {k: v for k in sorted([k async for k in s.keys()]) for v in [await s.get(k)]}
          for s in stores.all() if isinstance(s, KVStore)}
    vectors = {}
    for s in stores.all():
        if isinstance(s, VectorStore):
            vectors[s.namespace] = {r.id: (r.vector, r.metadata) async for page in s.records(50) for r in page}
    statuses = []
    page = await stores.doc_status.list_page(None, 1000)
    statuses = [r.model_dump() for r in page.items]
    return {"problems": problems, "answers": answers, "snapshot": await store_snapshot(stores),
            "kv": kv, "vectors": vectors, "doc_status": statuses}


def assert_same(got: dict, want: dict, leg: str) -> None:
    assert got["problems"] == [], (leg, got["problems"])
    assert got["snapshot"] == want["snapshot"], leg
    for key, answer in want["answers"].items():
        assert got["answers"][key] == answer, (leg, key, got['answers'][key], answer)
    for ns, records in want["kv"].items():
        extra, lost = got["kv"][ns].keys() - records.keys(), records.keys() - got["kv"][ns].keys()
        assert not extra and not lost, (leg, ns, [got["kv"][ns][k] for k in extra][:2], lost)
        assert got["kv"][ns] == records, (leg, ns, [k for k in records if records[k] != got["kv"][ns][k]][:3])
    assert got["doc_status"] == want["doc_status"], leg
    for ns, records in want["vectors"].items():
        assert got["vectors"][ns].keys() == records.keys(), (leg, ns)
        for id_, (vec, meta) in records.items():
            other, other_meta = got["vectors"][ns][id_]
            assert other_meta == meta, (leg, ns, id_)
            a, b = np.asarray(vec, dtype=np.float64), np.asarray(other, dtype=np.float64)
            assert np.allclose(a / np.linalg.norm(a), b / np.linalg.norm(b), atol=1e-5), (leg, ns, id_)


async def drop_all(settings: Settings) -> None:
    async with rag_for(settings) as rag:
        for store in rag.stores.all():
            await store.drop()
    async with build_store(settings, "kv", PROGRESS_NAMESPACE) as record:
        await record.drop()


def test_round_trip_through_every_leg_keeps_answers_and_stores(tmp_path):
    legs = chain(tmp_path)
    assert [c for c, _ in legs][0] == "embedded" and "servers" in [c for c, _ in legs]
    docs, questions = corpus()

    async def run() -> None:
        first = legs[0][1]
        async with rag_for(first) as rag:
            report = await rag.indexer().insert(docs)
            assert not report.failed and len(report.processed) == len(docs)
            want = await observe(rag, questions)
        assert want["problems"] == [] and all(a["answer"] for a in want["answers"].values())
        assert any(r["access"] for r in want["doc_status"]) and want["kv"]["llm_cache"]
        try:
            for (_, before), (combo, after) in zip(legs, legs[1:]):
                async with rag_for(before) as rag:
                    report = await rag.amigrate(after, batch=BATCH)
                assert not report.resumed and report.records == report.copied, combo
                assert report.records["graph:nodes"] == len(want["snapshot"]["nodes"])
                assert all(n > 0 for name, n in report.verified.items() if report.records[name]), report.verified
                async with rag_for(after) as rag:
                    assert_same(await observe(rag, questions), want, combo)
        finally:
            for combo, settings in legs[1:-1]:  # nothing left behind on shared servers
                await drop_all(settings)

    asyncio.run(run())


def _small_workspace(settings: Settings) -> None:
    async def run() -> None:
        async with rag_for(settings) as rag:
            await rag.ainsert(["Ada Lovelace worked with Charles Babbage in London."])

    asyncio.run(run())


def test_a_non_empty_target_is_refused_unless_forced(tmp_path):
    source, target = Settings(working_dir=tmp_path / "a"), Settings(working_dir=tmp_path / "b")
    _small_workspace(source)
    _small_workspace(target)
    with rag_for(source) as rag:
        with pytest.raises(MigrateError, match=r"not empty.*--force"):
            rag.migrate(target)
        report = rag.migrate(target, force=True)
        with pytest.raises(MigrateError, match="already holds a finished migration"):
            rag.migrate(target)
    assert report.records == report.copied and report.records["doc_status"] == 1


def test_another_embedder_or_the_same_workspace_is_refused(tmp_path):
    source = Settings(working_dir=tmp_path / "a")
    _small_workspace(source)
    other = Settings(working_dir=tmp_path / "b", embedder={"name": "hash", "options": {"dimension": 32}})
    with rag_for(source) as rag:
        with pytest.raises(MigrateError, match=r"dimension 64.*dimension 32.*same embedder|embeds nothing again"):
            rag.migrate(other)
        with pytest.raises(MigrateError, match="cannot be copied onto itself"):
            rag.migrate(source)
    async def empty() -> int:
        async with rag_for(other) as rag:
            return await rag.stores.full_docs.count()
    assert asyncio.run(empty()) == 0


def test_an_interrupted_copy_of_a_source_that_changed_since_is_not_resumed(tmp_path):
    source, target = Settings(working_dir=tmp_path / "a"), Settings(working_dir=tmp_path / "b")
    _small_workspace(source)
    with rag_for(source) as rag:
        rag.migrate(target)

    async def interrupt() -> None:  # as a run killed before its end leaves the record
        async with build_store(target, "kv", PROGRESS_NAMESPACE) as store:
            record = await store.get(PROGRESS_KEY)
            await store.upsert({PROGRESS_KEY: {**record, "finished": False}})

    asyncio.run(interrupt())
    _small_workspace(source)  # the same text: nothing changes, so the copy resumes
    with rag_for(source) as rag:
        assert rag.migrate(target).resumed
    asyncio.run(interrupt())
    with rag_for(source) as rag:
        rag.insert(["Grace Hopper wrote the first compiler at Remington Rand."])
        with pytest.raises(MigrateError, match=r"has changed since.*--force"):
            rag.migrate(target)
        assert rag.migrate(target, force=True).records["doc_status"] == 2
