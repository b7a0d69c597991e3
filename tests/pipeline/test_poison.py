"""A poison extraction answer fails at most its own document, once.

Before: an answer whose JSON held ``"bad \\ud800 text"`` failed the committer's
extraction write ("KV value ... not storable", naming a chunk), outside the
per-document error handling, and since the answer was cached every later run
failed the same way. Now answers are made storable (``ragkit.core.text``) and
checked before they are cached, and a document whose records a store would
still refuse fails alone, named, before anything of its batch is written.

The fuzz test sends 1,200 mangled answers (fixed seed) through ``Indexer.insert``
on the embedded stores, 100 documents a run: no run aborts, a clean document
indexes after every run, only answers with nothing readable fail (not cached,
retried), and ``check`` is clean at the end. Before the fix it aborted the first
run with "KV value for 'chunk-...' is not storable".
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

    async def leaky(chunk, llm, config, *space):
        if "LEAK" not in chunk.content:
            return await real(chunk, llm, config, *space)
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



async def test_a_rejected_answer_is_never_cached_and_a_rejected_cached_one_is_forgotten(tmp_path):
    from ragkit.core.llm_cache import CachedLLM

    async with make_rag(tmp_path, ScriptedLLM(script=lambda r: "bad \ud800 answer\x00")) as rag:
        llm = CachedLLM(rag.llm.llm, rag.stores.llm_cache)
        request = ChatRequest(prompt="p", role="extraction")

        def reject(text: str) -> str:
            raise ValueError("unreadable")

        with pytest.raises(ValueError):
            await llm.complete_checked(request, reject)
        assert await rag.stores.llm_cache.count() == 0, "a rejected answer was cached"
        assert await llm.complete_checked(request, str.upper) == "BAD \ufffd ANSWER", "cleaned, then checked"
        assert (await rag.stores.llm_cache.count()) == 1
        with pytest.raises(ValueError):  # a later check rejects the cached answer: it is dropped
            await llm.complete_checked(request, reject)
        assert await rag.stores.llm_cache.count() == 0


async def test_no_poisoned_string_reaches_the_graph_in_a_form_neo4j_refuses(tmp_path):
    """The Neo4j adapter refuses NUL and lone surrogates; the shared cleaning
    means none reach any graph store, so no adapter change is needed."""
    cypher = pytest.importorskip("ragkit_neo4j.cypher")
    llm = ScriptedLLM(script=answer_for({"POISONROWS": ROWS, "POISONJSON": JSON_ANSWER}))
    docs = [Document.from_text("POISONROWS one."), Document.from_text("POISONJSON two.")]
    async with make_rag(tmp_path, llm) as rag:
        report = await rag.indexer().insert(docs)
        assert len(report.processed) == 2
        strings = await graph_strings(rag)
        async for edge in rag.stores.graph.edges():
            strings += [edge.source, edge.target, edge.properties["description"], edge.properties["keywords"]]
        assert len(strings) > 10 and all(cypher.storable_text(s) for s in strings)


# --- fuzz: mangled answers through the whole pipeline ------------------------------------

FUZZ_SEED = 15
FUZZ_ANSWERS = 1200
FUZZ_BATCH = 100
NAMES = [
    "Ada Lovelace", "Harbour", "東京", "Zoë", "O'Brien", "Only My Heart Talkin'", "$", "ACME Corp",
    "Ｆｕｌｌ Ｗｉｄｔｈ", "Müller", "café", "Lighthouse", "Project A", "Project B", "北京大学", "Ω-3",
]
CONTROLS = "\x00\x01\x07\x08\x0b\x0c\x1b\x1f\x7f"


def base_answer(rng: random.Random) -> str:
    names = rng.sample(NAMES, 4)
    if rng.random() < 0.3:  # JSON, so that escapes decode to surrogates and NULs in the parser
        return json.dumps({
            "entities": [{"name": n, "type": "thing", "description": f"about {n}"} for n in names],
            "relations": [{"source": names[0], "target": n, "keywords": "k", "description": "d", "weight": 2}
                          for n in names[1:]],
        })
    rows = [f"entity<|#|>{n}<|#|>thing<|#|>about {n}" for n in names]
    rows += [f"relation<|#|>{names[0]}<|#|>{n}<|#|>kw<|#|>linked to {n}<|#|>3" for n in names[1:]]
    return "\n".join(rows) + "\n<|COMPLETE|>"


def _random_unicode(rng: random.Random, n: int) -> str:
    ranges = [(0x20, 0x7E), (0xA0, 0x2FF), (0x300, 0x36F), (0x4E00, 0x4E80), (0xD800, 0xDFFF),
              (0xE000, 0xE0FF), (0xFDD0, 0xFDEF), (0xFFF0, 0xFFFF), (0x1F600, 0x1F64F), (0x0, 0x1F)]
    return "".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(n))


def _insert(rng: random.Random, text: str, piece: str) -> str:
    at = rng.randint(0, len(text))
    return text[:at] + piece + text[at:]


MUTATIONS = {
    "lone surrogate": lambda r, t: _insert(r, t, chr(r.randint(0xD800, 0xDFFF))),
    "surrogate escape": lambda r, t: t.replace("about", "about \\ud800 \\udfff", 1),
    "NUL escape": lambda r, t: t.replace('"name": "', '"name": "\\u0000', 1),
    "NUL/control": lambda r, t: _insert(r, t, "".join(r.choices(CONTROLS, k=r.randint(1, 4)))),
    "control in name": lambda r, t: t.replace(r.choice(NAMES), "Na\x00me\x01", 1),
    "broken delimiter": lambda r, t: t.replace("<|#|>", r.choice(["<|#", "|>", "<||>", "<|#|><|#|>", ""]), r.randint(1, 3)),
    "huge name": lambda r, t: t.replace(r.choice(NAMES), "N" * r.choice([499, 500, 501, 5000]), 1),
    "U+FDFA run": lambda r, t: t.replace(r.choice(NAMES), "\ufdfa" * r.choice([27, 28, 300]), 1),
    "empty rows": lambda r, t: _insert(r, t, "\nentity<|#|><|#|><|#|>\nrelation<|#|><|#|><|#|><|#|>\n\n"),
    "truncated": lambda r, t: t[: r.randint(0, len(t))],
    "random unicode": lambda r, t: _insert(r, t, _random_unicode(r, r.randint(1, 40))),
    "random junk": lambda r, t: _random_unicode(r, r.randint(0, 200)),
    "no complete": lambda r, t: t.replace("<|COMPLETE|>", ""),
    "duplicated": lambda r, t: t + "\n" + t,
}


def mangled_answers(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        text = base_answer(rng)
        for name in rng.sample(sorted(MUTATIONS), rng.randint(1, 3)):
            text = MUTATIONS[name](rng, text)
        out.append(text)
    return out


async def test_fuzz_mangled_answers_never_abort_a_run_nor_block_a_later_one(tmp_path):
    started = time.perf_counter()
    answers = mangled_answers(FUZZ_SEED, FUZZ_ANSWERS)
    scripts = {f"fuzz{i:05d}x": a for i, a in enumerate(answers)}

    def answer(request: ChatRequest) -> str:
        if request.role != "extraction":
            return "a summary"
        marker = next((w for w in request.prompt.split() if w.startswith("fuzz") and w.endswith("x")), None)
        return scripts.get(marker, CLEAN)

    docs = [Document.from_text(f"{marker} text {i}.", file_path=f"f/{i}.txt") for i, marker in enumerate(scripts)]
    failures: dict[str, str] = {}
    async with make_rag(tmp_path, ScriptedLLM(script=answer)) as rag:
        for start in range(0, len(docs), FUZZ_BATCH):
            batch = docs[start : start + FUZZ_BATCH]
            report = await rag.indexer().insert(batch)  # a run abort would raise here
            assert set(report.processed) | set(report.failed) == {d.id for d in batch}
            failures.update(report.failed)

            # A later run with a clean document is never blocked; the failed ones
            # are retried, fail alone again, and nothing else changes.
            clean_doc = Document.from_text(f"A clean text after batch {start}.", file_path=f"clean/{start}.txt")
            later = await rag.indexer().insert([clean_doc])
            assert later.processed == [clean_doc.id], later.failed
            assert set(later.failed) == set(report.failed)
            await rag.indexer().delete(list(report.failed))  # as a user would, so batches stay independent

        assert (await check(rag.stores)).problems == []
        async for node in rag.stores.graph.nodes():
            assert record_problem(node.properties, node.id) is None and 0 < len(node.id) <= MAX_NAME_CHARS
            assert record_problem(node.id) is None
        async for edge in rag.stores.graph.edges():
            assert record_problem(edge.properties, f"{edge.source}-{edge.target}") is None
        processed = (await rag.astatus())["processed"]

    by_id = {d.id: d for d in docs}
    for doc_id, error in failures.items():
        # Only answers with nothing readable fail (not cached, retried); never a store's refusal.
        assert "no readable extraction" in error, error
        assert doc_id in error and by_id[doc_id].file_path in error, error
    assert processed == len(docs) - len(failures) + len(range(0, len(docs), FUZZ_BATCH))
    assert len(failures) < len(docs) / 4, f"{len(failures)} of {len(docs)} answers failed"
    assert time.perf_counter() - started < 60
