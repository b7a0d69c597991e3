"""``ragkit index --dry-run``: exact calls and input tokens, no LLM call, nothing written."""

from __future__ import annotations

import json

import pytest

from ragkit.cli.main import main
from ragkit.core.tokens import request_tokens
from ragkit.pipeline.dry_run import dry_run
from ragkit.pipeline.index import IndexConfig
from ragkit.protocols import ChatRequest, Completion
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.sections.index import ExtractConfig
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.corpus import write_passages
from ragkit.testing.replay import ReplayLLM, load_musique


class Recording:
    """A real LLM (the replay) whose requests are kept, to count what was sent."""

    def __init__(self) -> None:
        self.inner = ReplayLLM()
        self.model_id = self.inner.model_id
        self.capabilities = self.inner.capabilities
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        return await self.inner.complete(request)

    async def stream(self, request: ChatRequest):
        self.requests.append(request)
        async for piece in self.inner.stream(request):
            yield piece


@pytest.fixture(scope="module")
def docs() -> list[Document]:
    corpus = load_musique()[0][:12]
    # Two passages joined make multi-chunk documents at a small chunk size.
    return [
        Document.from_text(f"{a['title']}\n{a['text']}\n\n{b['title']}\n{b['text']}")
        for a, b in zip(corpus[::2], corpus[1::2])
    ]


@pytest.mark.parametrize("gleaning", [0, 1])
async def test_dry_run_counts_equal_what_insert_sends(tmp_path, docs, gleaning):
    config = IndexConfig(chunk_size=120, chunk_overlap=20, extract=ExtractConfig(gleaning=gleaning))
    llm = Recording()
    rag = RAG(Settings(working_dir=tmp_path), llm=llm, embedder=HashEmbedder({"dimension": 16}), index=config)
    async with rag:
        planned = await dry_run(docs, rag.tokenizer, config, stores=rag.stores, model_id=llm.model_id)
        assert llm.requests == [], "a dry run must not call the LLM"
        report = await rag.indexer().insert(docs)
    first = [r for r in llm.requests if not r.history]
    gleans = [r for r in llm.requests if r.history]
    assert planned.chunks == report.chunks > len(docs)
    assert planned.llm_calls == len(first) == report.chunks
    assert planned.input_tokens == sum(request_tokens(rag.tokenizer, r) for r in first)
    assert planned.gleaning_calls == len(gleans) == gleaning * report.chunks
    assert planned.output_tokens_estimate > 0


async def test_dry_run_skips_processed_documents_and_counts_cached_prompts(tmp_path, docs):
    config = IndexConfig(chunk_size=120, chunk_overlap=20)
    llm = Recording()
    rag = RAG(Settings(working_dir=tmp_path), llm=llm, embedder=HashEmbedder({"dimension": 16}), index=config)
    async with rag:
        await rag.indexer().insert(docs[:3])
        await rag.indexer().delete([docs[0].id])  # its answers stay in the LLM cache
        calls_before = len(llm.requests)
        planned = await dry_run(docs, rag.tokenizer, config, stores=rag.stores, model_id=llm.model_id)
        assert len(llm.requests) == calls_before
        report = await rag.indexer().insert(docs)
    assert planned.skipped_unchanged == 2 == len(report.skipped)
    assert planned.documents == len(docs) - 2
    assert planned.cached_calls == planned.per_document[docs[0].id]["chunks"] > 0
    assert planned.per_document[docs[0].id]["llm_calls"] == 0
    assert len(llm.requests) - calls_before == planned.llm_calls
    assert planned.output_ratio_source.startswith("measured on")


def test_cli_dry_run_writes_nothing(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "corpus"
    write_passages(corpus, limit=5)
    data = tmp_path / "data"
    (tmp_path / "ragkit.toml").write_text(f'working_dir = "{data}"\n[llm]\nname = "replay"\n')
    monkeypatch.chdir(tmp_path)
    code = main(["--config", str(tmp_path / "ragkit.toml"), "index", str(corpus), "--dry-run", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["documents"] == result["chunks"] == result["llm_calls"] == 5
    assert result["input_tokens"] > 5 * 500  # the system prompt with its examples is long
    assert result["llm"] == "replay"
    assert not data.exists(), "a dry run on a fresh workspace must not create it"
