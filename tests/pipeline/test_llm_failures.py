"""An LLM that times out, rate-limits or answers garbage for one chunk fails that
document only: status failed with the error, the rest indexed, and a retry on
the next run."""

from __future__ import annotations

import asyncio

import pytest

from ragkit.errors import ModelError
from ragkit.pipeline.check import check
from ragkit.pipeline.index import IndexConfig
from ragkit.protocols import ChatRequest, Completion
from ragkit.rag import RAG
from ragkit.schema import DocStatus, Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot


RATE_LIMITED = "429 Too Many Requests: retries exhausted"


class FaultyLLM:
    """The replay model, except for prompts that contain a trigger word, where it
    fails the way real services do. ``healthy = True`` ends the outage."""

    def __init__(self, faults: dict[str, str]) -> None:
        self.inner = ReplayLLM()
        self.model_id = self.inner.model_id
        self.capabilities = self.inner.capabilities
        self.faults = faults
        self.healthy = False
        self.calls = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        fault = next((f for word, f in self.faults.items() if word in request.prompt), None)
        if self.healthy or fault is None:
            return await self.inner.complete(request)
        if fault == "timeout":
            raise asyncio.TimeoutError("no answer in 60 s")
        if fault == "rate-limit":
            raise ModelError(RATE_LIMITED, public=RATE_LIMITED)  # as an adapter does: a public cause
        return Completion(text="I'm sorry, but I can't help with extracting that.")

    async def stream(self, request: ChatRequest):
        yield (await self.complete(request)).text


@pytest.fixture(scope="module")
def docs() -> list[Document]:
    corpus = load_musique()[0][:10]
    return [Document.from_text(p["title"] + "\n" + p["text"]) for p in corpus]


def title(doc: Document) -> str:
    return doc.content.split("\n", 1)[0]


async def test_failing_chunks_fail_their_documents_only_and_are_retried(tmp_path, docs):
    faults = {title(docs[2]): "timeout", title(docs[5]): "rate-limit", title(docs[7]): "garbage"}
    bad = {docs[2].id, docs[5].id, docs[7].id}
    llm = FaultyLLM(faults)
    rag = RAG(Settings(working_dir=tmp_path), llm=llm, embedder=HashEmbedder({"dimension": 16}),
              index=IndexConfig(llm_concurrency=3))
    async with rag:
        report = await rag.indexer().insert(docs)
        assert set(report.failed) == bad
        assert set(report.processed) == {d.id for d in docs} - bad
        records = {r.id: r for r in await rag.stores.doc_status.get([d.id for d in docs])}
        assert {i for i, r in records.items() if r.status is DocStatus.FAILED} == bad
        assert "TimeoutError" in records[docs[2].id].error
        assert "429" in records[docs[5].id].error
        assert "no readable extraction" in records[docs[7].id].error
        assert (await check(rag.stores)).problems == []
        good_state = await store_snapshot(rag.stores)
        failed_chunks = {c for d in bad for c in records[d].chunk_ids}
        assert not failed_chunks & set(good_state["chunks"]), "a failed document left chunks behind"

        # Still failing: the next run retries them, fails them again, touches nothing else.
        calls = llm.calls
        report = await rag.indexer().insert([])
        assert set(report.recovered) == bad and set(report.failed) == bad
        assert llm.calls - calls == 3, "the garbage answer must not have been cached"
        assert await store_snapshot(rag.stores) == good_state

        # The outage ends: the next run indexes them.
        llm.healthy = True
        report = await rag.indexer().insert([])
        assert set(report.recovered) == bad and not report.failed
        assert (await rag.astatus())["processed"] == len(docs)
        assert (await check(rag.stores)).problems == []
