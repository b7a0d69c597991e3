"""A delete goes through the ``deleting`` status, set before anything is removed:
a delete cut short is found by that status (``ragkit check``, the documents
listing) and finished by the next index run. Workspaces written before the
status existed marked a delete with a metadata flag on a ``processing`` record;
recovery still finishes those. (A real ``kill -9`` mid-delete is in
``test_index_kill9.py``.) Path resolution for ``ragkit delete`` is here too."""

from __future__ import annotations

import pytest

from ragkit.pipeline.check import check
from ragkit.pipeline.documents import list_documents, resolve_documents
from ragkit.pipeline.index import IndexConfig
from ragkit.rag import RAG
from ragkit.schema import LEGACY_DELETING_FLAG, DocStatus, Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot


class Interrupted(Exception):
    """Stands for the process dying at that point."""


@pytest.fixture(scope="module")
def docs() -> list[Document]:
    corpus = load_musique()[0][:12]
    return [Document.from_text(p["title"] + "\n" + p["text"], file_path=f"corpus/{i}.txt") for i, p in enumerate(corpus)]


def make_rag(path) -> RAG:
    return RAG(Settings(working_dir=path), llm=ReplayLLM(), embedder=HashEmbedder({"dimension": 32}),
               index=IndexConfig(llm_concurrency=4))


async def cut_short_delete(rag: RAG, doc_ids: list[str]) -> None:
    """A delete that dies once the graph is rebuilt, before the chunks go."""

    async def dies(ids):
        raise Interrupted

    rag.stores.chunk_vectors.delete = dies  # fault injection on the real store instance
    with pytest.raises(Interrupted):
        await rag.indexer().delete(doc_ids)
    del rag.stores.chunk_vectors.delete


async def finish_and_compare(rag: RAG, removed: list[str], docs: list[Document], tmp_path) -> None:
    """The next index run finishes the delete: the same stores as a fresh index
    of the other documents, and nothing for ``check`` to report."""
    report = await rag.indexer().insert([])
    assert sorted(report.recovered) == sorted(removed)
    assert await rag.stores.doc_status.get(removed) == [None, None]
    assert (await check(rag.stores)).problems == []
    after = await store_snapshot(rag.stores)
    async with make_rag(tmp_path / "fresh") as fresh:
        await fresh.indexer().insert([d for d in docs if d.id not in removed])
        assert await store_snapshot(fresh.stores) == after


async def test_an_interrupted_delete_is_found_by_status_and_finished(tmp_path, docs):
    removed = [docs[2].id, docs[8].id]
    async with make_rag(tmp_path / "a") as rag:
        await rag.indexer().insert(docs)
        await cut_short_delete(rag, removed)
        records = await rag.stores.doc_status.get(removed)
        assert [r.status for r in records] == [DocStatus.DELETING] * 2
        assert all(LEGACY_DELETING_FLAG not in r.metadata for r in records)
        assert (await rag.stores.doc_status.counts())[DocStatus.DELETING] == 2
        listed = await list_documents(rag.stores, "deleting")
        assert sorted(d.id for d in listed.documents) == sorted(removed) and listed.total == 2
        problems = (await check(rag.stores)).problems
        assert sorted(p.item for p in problems if p.kind == "interrupted delete") == sorted(removed)
        await finish_and_compare(rag, removed, docs, tmp_path)


async def test_a_legacy_flagged_delete_is_still_finished(tmp_path, docs):
    """The on-disk state the old code left: same removal steps, but the records
    were "processing" with ``ragkit_deleting`` in their metadata."""
    removed = [docs[4].id, docs[9].id]
    async with make_rag(tmp_path / "a") as rag:
        await rag.indexer().insert(docs)
        await cut_short_delete(rag, removed)
        legacy = [
            r.model_copy(update={"status": DocStatus.PROCESSING, "metadata": {**r.metadata, LEGACY_DELETING_FLAG: True}})
            for r in await rag.stores.doc_status.get(removed)
        ]
        await rag.stores.doc_status.upsert(legacy)
        assert (await rag.stores.doc_status.counts())[DocStatus.DELETING] == 0
        problems = (await check(rag.stores)).problems
        assert sorted(p.item for p in problems if p.kind == "interrupted delete") == sorted(removed)
        assert not [p for p in problems if p.kind == "interrupted document"]
        await finish_and_compare(rag, removed, docs, tmp_path)


async def test_resolve_ids_and_paths(tmp_path, docs):
    async with make_rag(tmp_path / "a") as rag:
        await rag.indexer().insert(docs[:4])
        # A processed document whose path has no doc_paths entry (as for
        # insert_custom_kg) is still found, by its status record.
        await rag.stores.doc_paths.delete(["corpus/3.txt"])
        resolution = await resolve_documents(
            rag.stores,
            [docs[0].id, "corpus/1.txt", str(tmp_path / "corpus" / "2.txt"), "corpus/3.txt", "corpus/1.txt", "nope", ""],
            cwd=tmp_path,
        )
        assert resolution.matches == {
            docs[0].id: [docs[0].id], "corpus/1.txt": [docs[1].id], str(tmp_path / "corpus" / "2.txt"): [docs[2].id],
            "corpus/3.txt": [docs[3].id], "nope": [], "": [],
        }
        assert resolution.unknown == ["nope", ""]
        assert resolution.doc_ids == [d.id for d in docs[:4]]
