"""A replay-indexed MuSiQue subset shared by the query tests (built once, read by each)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.sections.index import IndexConfig
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import Question, ReplayLLM, load_musique

N_QUESTIONS = 8


def make_rag(working_dir: Path, **kwargs) -> RAG:
    return RAG(
        Settings(working_dir=working_dir),
        llm=kwargs.pop("llm", None) or ReplayLLM(),
        embedder=HashEmbedder({"dimension": 256}),
        index=IndexConfig(llm_concurrency=4),
        **kwargs,
    )


@pytest.fixture(scope="session")
def questions() -> list[Question]:
    return load_musique()[2][:N_QUESTIONS]


@pytest.fixture(scope="session")
def indexed(tmp_path_factory, questions) -> Path:
    """The 20 candidate paragraphs of each question, one document each."""
    texts = {f"{p['title']}\n{p['paragraph_text']}" for q in questions for p in q["paragraphs"]}
    docs = [Document.from_text(t, file_path=f"musique/{i:03d}.txt", group=i % 3) for i, t in enumerate(sorted(texts))]
    folder = tmp_path_factory.mktemp("musique-index")

    async def build() -> None:
        async with make_rag(folder) as rag:
            report = await rag.indexer().insert(docs)
            assert not report.failed and len(report.processed) == len(docs)

    asyncio.run(build())
    return folder


@pytest.fixture
def workdir(indexed, tmp_path) -> Path:
    """A private copy, for tests that write (the LLM cache, deletes)."""
    target = tmp_path / "index"
    shutil.copytree(indexed, target)
    return target


def supporting_titles(question: Question) -> set[str]:
    return {p["title"] for p in question["paragraphs"] if p["is_supporting"]}
