"""A poison extraction answer fails at most its own document, once (issue 15, item 2).

Before: an answer whose JSON held ``"bad \\ud800 text"`` failed the committer's
extraction write ("KV value ... not storable", naming a chunk), outside the
per-document error handling, and since the answer was cached every later run
failed the same way. Now answers are made storable (``ragkit.core.text``) and
checked before they are cached, and a document whose records a store would
still refuse fails alone, named, before anything of its batch is written.
"""

from __future__ import annotations

import json
import random
import time

import pytest

from ragkit.core.extraction import ChunkExtraction
from ragkit.core.text import MAX_NAME_CHARS, clean, record_problem
from ragkit.pipeline import index as index_module
from ragkit.pipeline.check import check
from ragkit.pipeline.index import IndexConfig
from ragkit.protocols import ChatRequest
from ragkit.rag import RAG
from ragkit.schema import DocStatus, Document, Entity
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder, ScriptedLLM

ROWS = (
    "entity<|#|>Bad\x00Name<|#|>person<|#|>bad \ud800 text\n"
    "entity<|#|>Harbour<|#|>place<|#|>a quiet \x07 harbour\n"
    "relation<|#|>Bad\x00Name<|#|>Harbour<|#|>visits<|#|>sails \udfff to it\n"
    "<|COMPLETE|>"
)
# The reproduction from the issue: JSON escapes decode to a lone surrogate and a NUL.
JSON_ANSWER = (
    '{"entities": [{"name": "Bad\\u0000Json", "type": "person", "description": "bad \\ud800 text"},'
    ' {"name": "Lighthouse", "type": "place", "description": "tall"}],'
    ' "relations": [{"source": "Bad\\u0000Json", "target": "Lighthouse", "keywords": "keeps",'
    ' "description": "keeps \\udc00 it"}]}'
)
CLEAN = "entity<|#|>Ada<|#|>person<|#|>a mathematician\n<|COMPLETE|>"


def answer_for(scripts: dict[str, str]):
    """Extraction answers by a marker word of the chunk; summaries are plain text."""

    def answer(request: ChatRequest) -> str:
        if request.role != "extraction":
            return "a summary"
        return next((text for marker, text in scripts.items() if marker in request.prompt), CLEAN)

    return answer


def make_rag(tmp_path, llm) -> RAG:
    return RAG(Settings(working_dir=tmp_path), llm=llm, embedder=HashEmbedder({"dimension": 16}),
               index=IndexConfig(llm_concurrency=4))


async def graph_strings(rag: RAG) -> list[str]:
    """Every node id, name and description in the graph."""
    out = []
    async for node in rag.stores.graph.nodes():
        out += [node.id, node.properties.get("name", ""), node.properties.get("description", "")]
    return out


async def test_poison_answers_are_repaired_cached_clean_and_block_nothing(tmp_path):
    llm = ScriptedLLM(script=answer_for({"POISONROWS": ROWS, "POISONJSON": JSON_ANSWER}))
    rows = Document.from_text("POISONROWS the first poisoned text.", file_path="rows.txt")
    js = Document.from_text("POISONJSON the second poisoned text.", file_path="json.txt")
    async with make_rag(tmp_path, llm) as rag:
        report = await rag.indexer().insert([rows, js])
        assert sorted(report.processed) == sorted([rows.id, js.id]) and not report.failed
        strings = await graph_strings(rag)
        names = set(strings)
        assert "badname" in names and "badjson" in names, "NUL dropped from names and keys"
        assert any("bad \ufffd text" in s for s in strings), "lone surrogate became U+FFFD"
        assert all(record_problem(s) is None for s in strings)
        # The cached answers are the repaired text, so a later run reads them back fine.
        cached = [rec async for rec in _values(rag.stores.llm_cache)]
        assert cached and all(record_problem(rec) is None for rec in cached)
        assert (await check(rag.stores)).problems == []

        calls = len(llm.requests)
        later = Document.from_text("An unrelated later text.", file_path="later.txt")
        report = await rag.indexer().insert([later])
        assert report.processed == [later.id] and not report.failed and not report.recovered
        assert len(llm.requests) == calls + 1
        assert (await check(rag.stores)).problems == []


async def _values(kv):
    async for key in kv.keys():
        yield await kv.get(key)


async def test_an_unstorable_extraction_fails_its_document_alone_and_named(tmp_path, monkeypatch):
    """The last line of defence: an extraction that reached the indexer holding a
    NUL (here past the parser) fails its document, named by id and path, before
    the committer writes its batch; the other documents and later runs are fine."""
    real = index_module.extract_chunk

    async def leaky(chunk, llm, config):
        if "LEAK" not in chunk.content:
            return await real(chunk, llm, config)
        return ChunkExtraction(chunk_id=chunk.id, entities=[Entity(name="Bad\x00Name", source_ids=[chunk.id])])

    monkeypatch.setattr(index_module, "extract_chunk", leaky)
    llm = ScriptedLLM(script=answer_for({}))
    bad = Document.from_text("LEAK a text whose extraction leaks.", file_path="dir/leak.txt")
    good = [Document.from_text(f"Good text number {i}.", file_path=f"good{i}.txt") for i in range(3)]
    async with make_rag(tmp_path, llm) as rag:
        report = await rag.indexer().insert([bad, *good])
        assert set(report.failed) == {bad.id}
        assert sorted(report.processed) == sorted(d.id for d in good)
        error = report.failed[bad.id]
        assert bad.id in error and "dir/leak.txt" in error and "'\\x00'" in error, error
        (record,) = await rag.stores.doc_status.get([bad.id])
        assert record.status is DocStatus.FAILED and record.error == error
        assert "badname" not in await graph_strings(rag)
        assert (await check(rag.stores)).problems == []

        later = Document.from_text("A later text.", file_path="later.txt")
        report = await rag.indexer().insert([later])
        assert later.id in report.processed and set(report.failed) == {bad.id}, "only the bad one is retried"
        assert (await check(rag.stores)).problems == []


def test_clean_rules():
    assert clean("a\x00b\x01c\td\ne\rf\x0b\x0c\x1fg") == "abc\td\ne\rfg"
    assert clean("x \ud800 y \udfff") == "x \ufffd y \ufffd"
    assert clean("\ud83d\ude00") == "\U0001f600", "a pair split in two code points is joined"
    assert clean("plain ascii") == "plain ascii"
    assert record_problem({"a": ["ok", "b\x00"]}) == "value['a'][1]: it holds the control character '\\x00'"
    assert record_problem({"a": "\ud800"}).endswith("lone surrogate (not valid Unicode)")
    assert record_problem({"a": [1, 2.5, None, True, "\t\n"]}) is None
