"""The lexical channel: chunks ranked by the question's words (BM25 over the
chunk store's text index, ``KVStore.search_text``), fused by rank with the
mode's own chunks (issue 31, item 1)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ragkit.cli.main import main
from ragkit.protocols.base import StoreConfig
from ragkit.schema import Document
from ragkit.storage import SQLiteKVStore

from .conftest import make_rag

RETRIEVING = ["naive", "local", "global", "hybrid", "mix", "ppr"]
RARE = "Qwertyvale is a hamlet in Lower Saxony whose mayor since 2019 has been Ilse Brandtmeier."


@pytest.mark.parametrize("mode", RETRIEVING)
async def test_the_lexical_channel_runs_where_the_mode_uses_it_or_where_asked(workdir, questions, mode):
    """With ``lexical=True`` chunks only BM25 found join the ranking (stage
    ``chunk_text``) in every mode; with ``False`` in none; by default in the
    modes that use it (local and global) and the same as ``False`` elsewhere."""
    async with make_rag(workdir) as rag:
        seen = {True: 0, False: 0, None: 0}
        same = {True: True, False: True}
        for q in questions:
            results = {x: await rag.aquery(q["question"], mode=mode, only_need_context=True, lexical=x)
                       for x in (True, False, None)}
            for x, result in results.items():
                seen[x] += sum(c["stage"] == "chunk_text" for c in result.chunks)
            for x in (True, False):
                same[x] &= results[None].context == results[x].context
        assert seen[True] > 0 and seen[False] == 0, seen
        uses = mode in ("local", "global")
        assert (seen[None] > 0) == uses and same[uses], (seen, same)


async def test_a_rare_name_leads_and_a_deleted_documents_words_are_gone(workdir):
    """A question naming a rare word finds its chunk first in the text index,
    and the channel lifts it to the top two of the fused ranking (it ties
    with the dense list's first, which leads in round-robin order) from
    further down or nowhere without it; once its document is deleted,
    neither the text index nor any query returns it."""
    async with make_rag(workdir) as rag:
        report = await rag.indexer().insert([Document.from_text(RARE, file_path="rare.txt")])
        doc_id = report.processed[0]
        hits = await rag.stores.chunks.search_text("Who is the mayor of Qwertyvale?", 5)
        assert hits and "Qwertyvale" in (await rag.stores.chunks.get(hits[0][0]))["content"]
        ranks = {}
        for lexical in (True, False):  # naive leaves the channel out unless asked
            found = await rag.aquery("Who is the mayor of Qwertyvale?", mode="naive", only_need_context=True,
                                     lexical=lexical)
            ranks[lexical] = next((n for n, c in enumerate(found.chunks) if c["id"] == hits[0][0]), None)
        assert ranks[True] is not None and ranks[True] <= 1 and (ranks[False] is None or ranks[False] > ranks[True])
        await rag.adelete(doc_id)
        assert await rag.stores.chunks.search_text("Qwertyvale Brandtmeier", 5) == []
        gone = await rag.aquery("Who is the mayor of Qwertyvale?", mode="naive", only_need_context=True)
        assert all("Qwertyvale" not in c["content"] for c in gone.chunks)


async def test_a_scoped_query_only_reads_and_weighs_its_documents(workdir, questions, monkeypatch):
    """Scoped to one document, the lexical channel searches within its chunks
    (weighed among them alone) and the context holds only its chunks."""
    calls = []
    original = SQLiteKVStore.search_text

    async def recorded(self, question, top_k, **kwargs):
        hits = await original(self, question, top_k, **kwargs)
        calls.append((kwargs, hits))
        return hits

    monkeypatch.setattr(SQLiteKVStore, "search_text", recorded)
    async with make_rag(workdir) as rag:
        records = (await rag.stores.doc_status.list_page(limit=10_000)).items
        one = records[0]
        text = (await rag.stores.chunks.get(one.chunk_ids[0]))["content"]
        result = await rag.aquery(text[:200], mode="naive", only_need_context=True, doc_ids=[one.id], lexical=True)
        assert result.chunks and {c["doc_id"] for c in result.chunks} == {one.id}
        (kwargs, hits), = calls
        assert kwargs["population"] == len(one.chunk_ids) and hits
        assert {key for key, _ in hits} <= set(one.chunk_ids)


async def test_within_a_scope_scores_are_those_of_an_index_of_the_scope_alone(tmp_path: Path):
    """``search_text(within=..., population=...)`` scores as a store holding
    only the kept records would: the words of the others weigh nothing."""
    texts = {f"r{i}": f"river {'bridge ' * (i % 3)}town {i} of the valley" for i in range(12)}
    texts.update(x1="bridge bridge bridge", x2="bridge toll river", x3="the valley town hall")
    mine = {k for k in texts if k.startswith("r") and int(k[1:]) % 2 == 0}
    config = StoreConfig(namespace="chunks", working_dir=tmp_path, text_field="content")
    async with SQLiteKVStore(config) as everything, \
            SQLiteKVStore(config.model_copy(update={"workspace": "alone"})) as alone:
        await everything.upsert({k: {"content": t} for k, t in texts.items()})
        await alone.upsert({k: {"content": texts[k]} for k in mine})
        for question in ("bridge over the river", "valley town", "toll bridge"):
            scoped = await everything.search_text(question, 20, within=mine.__contains__, population=len(mine))
            assert scoped == await alone.search_text(question, 20)
            assert scoped != await everything.search_text(question, 20)


async def test_a_database_from_before_text_search_is_indexed_when_opened(tmp_path: Path):
    """A ``kv`` table without the ``terms`` column (ragkit before the lexical
    channel) gets it, and its records are found, on the first open."""
    path = tmp_path / "ws" / "ragkit.sqlite"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE kv (workspace TEXT NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL, "
                     "value TEXT NOT NULL, PRIMARY KEY (workspace, namespace, key))")
        conn.execute("INSERT INTO kv VALUES ('ws', 'chunks', 'c1', '{\"content\": \"Kassel hosts documenta\"}')")
    config = StoreConfig(namespace="chunks", workspace="ws", working_dir=tmp_path, text_field="content")
    async with SQLiteKVStore(config) as store:
        assert [k for k, _ in await store.search_text("documenta in Kassel", 5)] == ["c1"]
        assert await store.get("c1") == {"content": "Kassel hosts documenta"}


def test_cli_query_without_the_lexical_channel(workdir, questions, capsys, monkeypatch):
    """``ragkit query --lexical on|off`` asks with ``lexical=True|False``."""
    (workdir / "ragkit.toml").write_text(f'working_dir = "{workdir}"\n[embedder]\nname = "hash"\n'
                                         '[embedder.options]\ndimension = 256\n')
    monkeypatch.chdir(workdir)
    stages = {}
    for mode, flag in (("naive", "on"), ("local", "off"), ("naive", None)):
        more = ["--lexical", flag] if flag else []
        assert main(["query", questions[0]["question"], "--mode", mode, "--context-only", "--json", *more]) == 0
        stages[flag] = {c["stage"] for c in json.loads(capsys.readouterr().out)["chunks"]}
    assert "chunk_text" in stages["on"] and "chunk_text" not in stages["off"] | stages[None], stages


def test_eval_asks_every_question_with_the_lexical_choice(workdir, questions, capsys, monkeypatch):
    """``ragkit eval --lexical on`` runs the channel in naive (which leaves it
    out by default), ``--lexical off`` nowhere: what it adds on a user's own questions."""
    (workdir / "ragkit.toml").write_text(f'working_dir = "{workdir}"\n[embedder]\nname = "hash"\n'
                                         '[embedder.options]\ndimension = 256\n')
    monkeypatch.chdir(workdir)
    asked = workdir / "questions.jsonl"
    asked.write_text("".join(json.dumps({"question": q["question"], "expected": [q["answer"]]}) + "\n"
                             for q in questions[:3]))
    searched: list[str] = []
    original = SQLiteKVStore.search_text

    async def counted(self, question, *args, **kwargs):
        searched.append(question)
        return await original(self, question, *args, **kwargs)

    monkeypatch.setattr(SQLiteKVStore, "search_text", counted)
    for flag, mode, expected in (("on", "naive", True), ("off", "local", False), (None, "local", True)):
        searched.clear()
        more = ["--lexical", flag] if flag else []
        assert main(["eval", str(asked), "--mode", mode, "--json", *more]) == 0
        report = json.loads(capsys.readouterr().out)["reports"][0]
        assert report["rows"][0]["mode"] == mode
        assert bool(searched) == expected, (flag, mode, len(searched))


def test_every_term_is_letters_and_digits_only():
    """Terms are what ``KVStore`` promises adapters: runs of letters and
    digits (``lexical.TERM``), case-folded, even where folding adds a mark
    (Turkish "İ"), for compatibility forms (ligatures, Roman numerals,
    superscripts) and for Chinese cut by jieba."""
    from ragkit.lexical import TERM, query_terms, terms

    text = "İstanbul'un ǅemal ﬁnance Ⅻ x² — 苹果公司的创始人 Hank-Snow's 1914"
    found = terms(text)
    assert found and all(TERM.fullmatch(t) for t in found), found
    assert {"istanbul", "financ", "xii", "x2", "苹果公司", "hank", "snow", "1914"} <= set(found), found
    assert query_terms("İSTANBUL") == ["istanbul"]
