"""Entity resolution at index time (issue 31, item 2): alias links between
entities whose names are variants of one name, kept exact through deletes,
split by a user and kept split, listed by ``ragkit graph aliases``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.core.alias_index import AliasIndex
from ragkit.core.scope import Scope
from ragkit.pipeline.index import IndexConfig
from ragkit.query import ppr
from ragkit.query.search import Searcher
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder, ScriptedLLM
from ragkit.testing.snapshot import store_snapshot

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"
DOCS = {
    "Report one.": ["United States", "Zorblax Corp"],
    "Report two.": ["George W. Bush", "Quentar Holdings"],
    "Report three.": ["George Bush", "Zorblax"],
    "Report four.": ["The Beatles", "Quentar"],
    "Report five.": ["Beatles", "北京大学"],
    "Report six.": ["北大", "北京"],
    "Report seven.": ["U.S.", "臺灣大學"],
    "Report eight.": ["台湾大学", "Quentar"],
}
LINKED = {
    ("george bush", "george w. bush", "initials"),
    ("zorblax", "zorblax corp", "same name"),
    ("beatles", "the beatles", "same name"),
    ("北京大学", "北大", "abbreviation"),
    ("台湾大学", "臺灣大學", "same name"),
}
"""Not U.S. and United States (an acronym: only the model check links it), nor
北京 and 北京大学, nor Quentar and Quentar Holdings."""
TEXTS = [f"{marker} " + " and ".join(names) + " met in the capital." for marker, names in DOCS.items()]


def scripted(reports: dict[str, list[str]], *, low: tuple[str, ...] = (), aliases=None):
    """A scripted model: each report's two names as entities with a relation
    between them (the marker of the last report quoted: the prompt's examples
    name none), ``low`` as a question's keywords, ``aliases`` answering the
    alias check."""

    def script(request) -> str:
        if request.role == "aliases" and aliases is not None:
            return aliases(request)
        if request.role != "extraction":
            return json.dumps({"high_level_keywords": [], "low_level_keywords": list(low)})
        marker = max((m for m in reports if m in request.prompt), key=request.prompt.rfind)
        a, b = reports[marker]
        rows = [f"entity<|#|>{n}<|#|>organization<|#|>{n} is named in {marker}" for n in (a, b)]
        return "\n".join([*rows, f"relation<|#|>{a}<|#|>{b}<|#|>meeting<|#|>{a} met {b}."]) + "\n<|COMPLETE|>"

    return script


extraction = scripted(DOCS)


def rag_at(path: Path, *, aliases: bool = True) -> RAG:
    return RAG(Settings(working_dir=path), llm=ScriptedLLM(script=extraction),
               embedder=HashEmbedder({"dimension": 32}), index=IndexConfig(aliases=aliases))


def documents(texts: list[str]) -> list[Document]:
    return [Document.from_text(t, file_path=f"reports/{i}.txt") for i, t in enumerate(texts)]


async def links(rag: RAG) -> set[tuple[str, str, str]]:
    return {(a.a, a.b, a.reason) for a in await AliasIndex(rag.stores.aliases, rag.stores.alias_splits).all()
            if not a.split}


async def test_aliases_are_linked_across_documents(tmp_path):
    async with rag_at(tmp_path) as rag:
        await rag.indexer().insert(documents(TEXTS))
        assert await links(rag) == LINKED


async def test_off_links_nothing(tmp_path):
    async with rag_at(tmp_path, aliases=False) as rag:
        await rag.indexer().insert(documents(TEXTS))
        assert await links(rag) == set()


@pytest.mark.parametrize("removed", [[0], [2, 3], [4, 5]])
async def test_a_delete_leaves_the_links_of_a_fresh_index(tmp_path, removed):
    docs = documents(TEXTS)
    async with rag_at(tmp_path / "a") as rag:
        await rag.indexer().insert(docs)
        await rag.indexer().delete([docs[i].id for i in removed])
        after = await store_snapshot(rag.stores)
    kept = [d for i, d in enumerate(docs) if i not in removed]
    async with rag_at(tmp_path / "b") as fresh:
        await fresh.indexer().insert(kept)
        assert await store_snapshot(fresh.stores) == after
        assert await links(fresh) < await _all_links(tmp_path / "c", docs)  # the delete undid something


async def _all_links(path: Path, docs: list[Document]) -> set:
    async with rag_at(path) as rag:
        await rag.indexer().insert(docs)
        return await links(rag)


async def test_the_snapshot_sees_the_links(tmp_path):
    """The exactness tests compare snapshots: they would hide a wrong link if
    the snapshot left the alias store out."""
    async with rag_at(tmp_path / "a") as rag:
        await rag.indexer().insert(documents(TEXTS[:3]))
        with_links = await store_snapshot(rag.stores)
    async with rag_at(tmp_path / "b", aliases=False) as rag:
        await rag.indexer().insert(documents(TEXTS[:3]))
        assert await store_snapshot(rag.stores) != with_links


async def test_a_split_pair_stays_split_when_reindexed_and_join_undoes_it(tmp_path):
    docs = documents(TEXTS)
    async with rag_at(tmp_path) as rag:
        await rag.indexer().insert(docs)
        index = AliasIndex(rag.stores.aliases, rag.stores.alias_splits)
        async with rag.stores.writing("test"):
            await index.split("Zorblax", "Zorblax Corp")
        assert ("zorblax", "zorblax corp", "same name") not in await links(rag)
        await rag.indexer().delete([docs[0].id, docs[2].id])  # both names gone...
        await rag.indexer().insert([docs[0], docs[2]])  # ...and back
        assert ("zorblax", "zorblax corp", "same name") not in await links(rag)
        listed = {(a.a, a.b): a.split for a in await index.all()}
        assert listed[("zorblax", "zorblax corp")] is True
        async with rag.stores.writing("test"):
            assert await index.join("Zorblax Corp", "Zorblax")
        assert ("zorblax", "zorblax corp", "same name") in await links(rag)


async def test_split_refuses_a_pair_the_rules_do_not_link(tmp_path):
    async with rag_at(tmp_path) as rag:
        await rag.indexer().insert(documents(TEXTS))
        with pytest.raises(ValueError, match="not linked by the alias rules"):
            await AliasIndex(rag.stores.aliases, rag.stores.alias_splits).split("北京", "北京大学")


async def test_rebuild_links_an_index_built_with_aliases_off(tmp_path):
    async with rag_at(tmp_path / "a") as rag:
        await rag.indexer().insert(documents(TEXTS))
        expected = await links(rag)
    async with rag_at(tmp_path / "b", aliases=False) as rag:
        await rag.indexer().insert(documents(TEXTS))
        keys = [n.id async for n in rag.stores.graph.nodes()]
        async with rag.stores.writing("test"):
            await AliasIndex(rag.stores.aliases, rag.stores.alias_splits).rebuild(keys)
        assert await links(rag) == expected


async def test_the_walk_crosses_an_alias_link_the_reader_may_see(tmp_path):
    """ppr's neighbourhood of "George Bush" reaches "George W. Bush" and,
    through its relation, "Quentar Holdings"; a reader who may not read the
    report naming "George W. Bush" does not cross."""
    docs = documents(TEXTS[1:3])
    async with rag_at(tmp_path) as rag:
        await rag.indexer().insert(docs)
        searcher = Searcher(rag.stores, rag.embedder)
        nodes, edges = await ppr.neighbourhood(searcher.graph, ["george bush"], links=searcher.aliases)
        assert {"george w. bush", "quentar holdings"} <= set(nodes)
        assert ("george bush", "george w. bush") in edges
        without, _ = await ppr.neighbourhood(searcher.graph, ["george bush"])
        assert "george w. bush" not in without
        records = [r for r in await rag.stores.doc_status.get([docs[1].id]) if r is not None]
        scoped = Searcher(rag.stores, rag.embedder, scope=Scope.of(records))
        nodes, edges = await ppr.neighbourhood(scoped.graph, ["george bush"], links=scoped.aliases)
        assert "george w. bush" not in nodes and not any("george w. bush" in e for e in edges)


def ragkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


async def test_cli_lists_splits_and_joins(tmp_path):
    async with rag_at(tmp_path / "ragkit_data") as rag:
        await rag.indexer().insert(documents(TEXTS))
    listed = json.loads(ragkit("graph", "aliases", "--json", cwd=tmp_path).stdout)
    assert {(a["a"], a["b"], a["reason"]) for a in listed["aliases"]} == LINKED
    out = ragkit("graph", "aliases", "--split", "George Bush", "George W. Bush", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "stay apart" in out.stdout and re.search(r"4 alias link\(s\), 1 split pair", out.stdout)
    out = ragkit("graph", "aliases", "--of", "GEORGE BUSH", "--json", cwd=tmp_path)
    rows = json.loads(out.stdout)["aliases"]
    assert {(a["a"], a["b"], a["split"]) for a in rows} == {("george bush", "george w. bush", True)}
    bad = ragkit("graph", "aliases", "--split", "Nowhere Inc", "United States", cwd=tmp_path)
    assert bad.returncode == 2 and "no entity named 'Nowhere Inc'" in bad.stderr and "Fix:" in bad.stderr
    bad = ragkit("graph", "aliases", "--split", "北京", "北京大学", cwd=tmp_path)
    assert bad.returncode == 2 and "not linked by the alias rules" in bad.stderr
    out = ragkit("graph", "aliases", "--join", "George W. Bush", "George Bush", cwd=tmp_path)
    assert out.returncode == 0 and "5 alias link(s), 0 split pair" in out.stdout
    # A split whose entity is gone can still be undone.
    assert ragkit("graph", "aliases", "--split", "George Bush", "George W. Bush", cwd=tmp_path).returncode == 0
    gone = ragkit("delete", "reports/1.txt", cwd=tmp_path)
    assert gone.returncode == 0, gone.stderr
    out = ragkit("graph", "aliases", "--join", "George W. Bush", "George Bush", cwd=tmp_path)
    assert out.returncode == 0 and "4 alias link(s), 0 split pair" in out.stdout, out.stdout + out.stderr


# -- the model check of the pairs the rules leave open ---------------------------------

CHECKED = {
    "Memo one.": ["NATO", "Iron Maiden (album)"],
    "Memo two.": ["North Atlantic Treaty Organization", "Iron Maiden"],
}
ORACLE = {("nato", "north atlantic treaty organization")}
"""What the scripted model says is one entity (Iron Maiden the album is not the band)."""


def oracle(request) -> str:
    lines = re.findall(r'^(\d+)\. "(.*)" \| "(.*)"$', request.prompt, re.M)
    return json.dumps({"same": [int(n) for n, a, b in lines if (a, b) in ORACLE]})


def checked_rag(path: Path, answer_aliases=oracle) -> RAG:
    return RAG(Settings(working_dir=path), llm=ScriptedLLM(script=scripted(CHECKED, aliases=answer_aliases)),
               embedder=HashEmbedder({"dimension": 32}), index=IndexConfig(alias_check=True))


async def test_the_model_check_links_what_it_confirms_and_is_asked_once(tmp_path):
    docs = documents([f"{m} " + " and ".join(n) + "." for m, n in CHECKED.items()])
    async with checked_rag(tmp_path) as rag:
        report = await rag.indexer().insert(docs)
        assert report.llm["calls"]["aliases"] == 1  # both open pairs in one call
        assert await links(rag) == {("nato", "north atlantic treaty organization", "acronym, checked")}
        await rag.indexer().delete([docs[1].id])
        assert await links(rag) == set()
        again = await rag.indexer().insert([docs[1]])  # the counts are the workspace model's, so far
        assert again.llm["calls"]["aliases"] == 1 and again.llm["cache_hits"]["aliases"] == 1
        assert await links(rag) == {("nato", "north atlantic treaty organization", "acronym, checked")}
        # Another mention changes NATO's description, not its name: nothing is asked again.
        more = await rag.indexer().insert(documents(["Memo one. NATO and Iron Maiden (album) met again."]))
        assert more.llm["calls"]["aliases"] == 1 and more.llm["cache_hits"]["aliases"] == 1
        index = rag.indexer().alias_index()
        async with rag.stores.writing("test"):
            await index.split("NATO", "North Atlantic Treaty Organization")
            assert await links(rag) == set()
            assert await index.join("NATO", "North Atlantic Treaty Organization")  # the check is asked again
        assert await links(rag) == {("nato", "north atlantic treaty organization", "acronym, checked")}


@pytest.mark.parametrize("answer", ["yes, all of them", '{"same": "1"}', '{"same": [true, 0, 3, "1"]}', ""])
async def test_an_answer_that_is_not_the_object_asked_for_links_nothing(tmp_path, answer):
    docs = documents([f"{m} " + " and ".join(n) + "." for m, n in CHECKED.items()])
    async with checked_rag(tmp_path, lambda request: answer) as rag:
        report = await rag.indexer().insert(docs)
        assert not report.failed
        assert await links(rag) == set()


def test_same_lines_reads_the_numbers_of_listed_lines_only():
    from ragkit.core.alias_check import same_lines

    assert same_lines('Sure: {"same": [2, 1]}', 3) == {1, 2}
    assert same_lines('{"same": [0, 4, true, 2.0, "3", 3]}', 3) == {3}
    assert same_lines('{"same": []}', 3) == set()
    assert same_lines('{"different": [1]}', 3) is None
    assert same_lines("{not json}", 3) is None


async def test_an_update_cut_short_at_its_links_asks_the_check_again(tmp_path, monkeypatch):
    """The blocks are written last: an update that dies writing its links
    finds its keys new when it is redone, and asks the check again. (Blocks
    first, the keys were known the second time, the check was not asked and
    the link was lost.)"""
    asked: list[list] = []

    async def check(pairs):
        asked.append(pairs)
        return {(a, b) for a, b, _ in pairs}

    write_links = AliasIndex._write_links

    async def dying(self, links):
        if links and len(asked) == 1:
            raise OSError("No space left on device")
        return await write_links(self, links)

    monkeypatch.setattr(AliasIndex, "_write_links", dying)
    keys = ["nato", "north atlantic treaty organization"]
    async with rag_at(tmp_path) as rag:
        index = AliasIndex(rag.stores.aliases, rag.stores.alias_splits, check)
        async with rag.stores.writing("test"):
            with pytest.raises(OSError, match="No space left"):
                await index.update(keys, [])
            await index.update(keys, [])  # the graph update redone
        assert len(asked) == 2
        assert await links(rag) == {("nato", "north atlantic treaty organization", "acronym, checked")}


async def test_check_finds_links_to_no_entity_and_repair_rebuilds_them(tmp_path):
    from ragkit.pipeline.check import check

    async with rag_at(tmp_path) as rag:
        await rag.indexer().insert(documents(TEXTS))
        assert not [p for p in (await check(rag.stores)).problems if p.kind == "orphan alias"]
        # What an update cut short between the graph and the links could leave.
        await rag.stores.aliases.upsert({"links:ghost": {"links": {"beatles": "same name"}},
                                         "links:beatles": {"links": {"the beatles": "same name", "ghost": "x"}}})
        found = [p.item for p in (await check(rag.stores)).problems if p.kind == "orphan alias"]
        assert found == ["ghost"]
        report = await check(rag.stores, rag.indexer().updater, repair=True)
        assert [p.repaired for p in report.problems if p.kind == "orphan alias"] == [True]
        assert not (await check(rag.stores)).problems
        assert await links(rag) == LINKED


SQUARE = {
    "Note one.": ["George Bush", "Zorblax"], "Note two.": ["George W. Bush", "Zorblax"],
    "Note three.": ["George Bush", "Quentar"], "Note four.": ["George W. Bush", "Quentar"],
    "Note five.": ["Zorblax", "Quentar"],
}


async def test_an_alias_link_takes_no_relations_place_in_ppr(tmp_path):
    """Four entities, five relations among them and one alias link: the four
    relations ppr keeps (top_k 4) are relations, the link not among them."""
    async with RAG(Settings(working_dir=tmp_path), llm=ScriptedLLM(script=scripted(SQUARE, low=("George Bush",))),
                   embedder=HashEmbedder({"dimension": 32})) as rag:
        await rag.indexer().insert(documents([f"{m} {a} met {b}." for m, (a, b) in SQUARE.items()]))
        assert await links(rag) == {("george bush", "george w. bush", "initials")}
        searcher = Searcher(rag.stores, rag.embedder)
        entities, relations, _ = await searcher.ppr(["George Bush"], [], 4, "Whom did George Bush meet?")
        assert {e.key for e in entities} == {"george bush", "george w. bush", "zorblax", "quentar"}
        assert len(relations) == 4 and ("george bush", "george w. bush") not in {r.key for r in relations}
