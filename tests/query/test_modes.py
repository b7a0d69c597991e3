"""Query modes are plugins: registered through the hooks adapters use, looked up
by the engine (which tests no mode name), refused with a reason when
mis-declared, and the one list the API, the CLI and ``ragkit plugins`` share."""

from __future__ import annotations

import ast
import asyncio
import gc
import json
import types
import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

import ragkit.query.engine
from ragkit.cli import plugins_cmd
from ragkit.cli.main import main
from ragkit.errors import AdapterNotFoundError, DuplicateAdapterError, PluginLoadError, StoreError
from ragkit.plugins import KINDS, get_registry, hookimpl
from ragkit.query.modes import BUILTIN_MODES, Found, Naive, QueryMode, available_modes
from ragkit.schema import QueryParam
from ragkit.testing import ScriptedLLM
from ragkit.testing.registry import registry_with

from .conftest import make_rag

BUILTIN = ["bypass", "global", "hybrid", "local", "mix", "naive", "ppr"]


class FirstChunks(QueryMode):
    """A third-party-style mode used by import path: the question's nearest
    three chunks, with no keywords and no graph."""

    name = "first-chunks"
    extracts_keywords = False

    def texts(self, question, keywords, param):
        return [question]

    async def search(self, question, keywords, param, searcher):
        return Found(chunks=await searcher.chunks(question, 3))


class Silent(QueryMode):
    """Retrieves nothing: the engine must treat it like ``bypass``."""

    name = "silent"
    retrieves = False
    extracts_keywords = False


class NoSearch(QueryMode):
    name = "no-search"


class SyncSearch(QueryMode):
    name = "sync-search"

    def search(self, question, keywords, param, searcher):  # not async
        return Found()


class NotAMode:
    name = "not-a-mode"


class NeedsArgs(Naive):
    name = "needs-args"

    def __init__(self, depth: int) -> None:
        self.depth = depth


def fake_plugin(name: str, *classes: type) -> types.ModuleType:
    module = types.ModuleType(name)

    def register_query_modes(register):
        for cls in classes:
            register(cls, cls.__dict__.get("name") or None)

    module.register_query_modes = hookimpl(register_query_modes)
    return module



# -- the one list ----------------------------------------------------------------


def test_builtin_modes_are_registered_by_ragkit_through_the_hook():
    registry = get_registry()
    assert set(BUILTIN) <= set(registry.names("query_mode"))
    for info in registry.adapters("query_mode"):
        if info.name in BUILTIN:
            assert (info.distribution, info.plugin) == ("ragkit", "ragkit.builtin")
    assert {cls.name for cls in BUILTIN_MODES} == set(BUILTIN)
    listed = available_modes()
    assert [m.name for m in listed] == registry.names("query_mode")
    assert all(m.description for m in listed if m.name in BUILTIN)


def test_cli_choices_and_plugins_listing_come_from_the_registry(capsys):
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    help_text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, at hyphens too
    assert "howtoretrieve:" + ",".join(get_registry().names("query_mode")) + "(default:ppr" in help_text

    assert main(["plugins", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    modes = [(r["name"], r["distribution"], r["status"]) for r in rows if r["kind"] == "query_mode"]
    assert {m for m in modes if m[0] in BUILTIN} == {(m, "ragkit", "ok") for m in BUILTIN}
    # Kinds are listed in the table's order, modes last.
    kinds = [r["kind"] for r in rows if r["kind"] != "-"]
    assert kinds == sorted(kinds, key=list(KINDS).index) and kinds[-1] == "query_mode"


def test_engine_names_no_mode():
    """The engine branches on what a mode declares, never on its name: no
    built-in mode's name is a string in its source."""
    tree = ast.parse(Path(ragkit.query.engine.__file__).read_text(encoding="utf-8"))
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not strings & set(BUILTIN), strings & set(BUILTIN)


# -- unknown and mis-declared modes -------------------------------------------------


def test_unknown_mode_lists_the_registered_ones_and_how_to_add_one(capsys):
    with pytest.raises(ValidationError) as caught:
        QueryParam(mode="telepathy")
    message = str(caught.value)
    assert "no query mode named 'telepathy'" in message
    assert "naive, ppr" in message and "register_query_modes" in message and "package.module:Class" in message

    with pytest.raises(SystemExit) as exited:
        main(["query", "What?", "--mode", "telepathy"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --mode: no query mode named 'telepathy'" in err and "register_query_modes" in err


def test_mis_declared_modes_are_listed_with_the_reason_and_never_used():
    good = fake_plugin("good_modes", FirstChunks)
    bad = fake_plugin("bad_modes", NoSearch, SyncSearch, NotAMode, NeedsArgs, FirstChunks)
    registry = registry_with(good, bad)
    refused = {i.name: i.error for i in registry.refused("query_mode")}
    assert set(refused) == {"no-search", "sync-search", "not-a-mode", "needs-args"}
    assert "defines no search(" in refused["no-search"]
    assert "async def search" in refused["sync-search"]
    assert "not a subclass of ragkit.query.modes.QueryMode" in refused["not-a-mode"]
    assert "constructible without arguments" in refused["needs-args"]
    # The plugin itself loaded; its refused classes are not usable names.
    assert all(r.error is None for r in registry.plugins)
    assert "no-search" not in registry.names("query_mode") and "first-chunks" in registry.names("query_mode")
    with pytest.raises(AdapterNotFoundError, match="refused: dist-bad_modes 1.0 .*defines no search"):
        registry.get("query_mode", "no-search")
    # Two plugins claiming one name: resolving it names both, other modes still resolve.
    with pytest.raises(DuplicateAdapterError, match="dist-good_modes.*dist-bad_modes"):
        registry.get("query_mode", "first-chunks")
    assert registry.get("query_mode", "mix").name == "mix"
    with pytest.raises(PluginLoadError) as strict:
        registry.raise_for_errors()
    assert "query_mode 'no-search' refused" in str(strict.value) and "'first-chunks'" in str(strict.value)


def test_a_clash_with_a_builtin_name_breaks_only_that_name(monkeypatch):
    class MyNaive(Naive):
        pass

    registry = registry_with(fake_plugin("shadow", MyNaive))
    with pytest.raises(DuplicateAdapterError, match="'naive'.*ragkit 0.1.0.*dist-shadow"):
        registry.get("query_mode", "naive")
    assert registry.get("query_mode", "mix").name == "mix"
    monkeypatch.setattr(plugins_cmd, "get_registry", lambda: registry)
    rows = {(r["name"], r["distribution"]): r for r in plugins_cmd.rows() if r["kind"] == "query_mode"}
    for dist in ("ragkit", "dist-shadow"):
        assert rows[("naive", dist)]["status"] == "conflict"
        assert "ragkit (ragkit.builtin), dist-shadow (shadow)" in rows[("naive", dist)]["error"]
    assert rows[("mix", "ragkit")]["status"] == "ok"


def test_an_import_path_is_checked_like_a_registered_class():
    assert QueryParam(mode=f"{__name__}:FirstChunks").mode.endswith(":FirstChunks")
    with pytest.raises(ValidationError, match="defines no search"):
        QueryParam(mode=f"{__name__}:NoSearch")


# -- the engine runs what the mode declares ------------------------------------------


async def test_a_mode_from_outside_runs_through_the_engine(workdir, questions):
    llm = ScriptedLLM(script=lambda r: '{"high_level_keywords": ["a"], "low_level_keywords": ["b"]}'
                      if r.role == "keywords" else "An answer [1].")
    question = questions[0]["question"]
    async with make_rag(workdir, llm=llm) as rag:
        before = rag.embedder.calls
        mine = await rag.aquery(question, mode=f"{__name__}:FirstChunks", only_need_context=True)
        assert rag.embedder.calls - before == 1
        naive = await rag.aquery(question, mode="naive", only_need_context=True, chunk_top_k=3)
        assert [c["id"] for c in mine.chunks] == [c["id"] for c in naive.chunks] and len(mine.chunks) == 3
        assert mine.metadata["mode"].endswith(":FirstChunks") and not mine.entities
        # Neither mode asked for keywords: no keyword call, none reported.
        assert [r.role for r in llm.requests] == [] and "keywords" not in mine.metadata

        silent = await rag.aquery(question, mode=f"{__name__}:Silent")
        assert silent.answer == "An answer [1]." and silent.context == "" and not silent.chunks
        assert [r.role for r in llm.requests] == ["answer"]

        mix = await rag.aquery(question, mode="mix", only_need_context=True)
        assert [r.role for r in llm.requests] == ["answer", "keywords"]
        assert mix.metadata["keywords"]["low_level"] == ["b"]


# -- a mode's independent searches wait side by side --------------------------------------


class InFlight:
    """Wraps the vector stores' searches: each takes 50 ms (a server's round
    trip), and the most searches waiting at once is recorded."""

    def __init__(self, rag) -> None:
        self.now = self.most = 0
        for store in (rag.stores.entity_vectors, rag.stores.relation_vectors, rag.stores.chunk_vectors):
            store.query = self._slow(store.query)

    def _slow(self, query):
        async def run(*args, **kwargs):
            self.now += 1
            self.most = max(self.most, self.now)
            try:
                await asyncio.sleep(0.05)
                return await query(*args, **kwargs)
            finally:
                self.now -= 1

        return run


@pytest.mark.parametrize("mode, at_once", [("local", 2), ("global", 2), ("hybrid", 3), ("mix", 3), ("ppr", 3)])
async def test_a_modes_independent_searches_run_at_once_and_answer_the_same(workdir, questions, mode, at_once):
    """Unscoped, a mode's chains (local's, global's, the dense floor's, ppr's
    seed searches) run at once, so on server stores their round trips
    overlap; the answer is the one the searches give one after the other
    (scoped, they do: ``Searcher.together``), with every search made."""
    llm = ScriptedLLM(script=lambda r: '{"high_level_keywords": ["history", "music"], '
                                       '"low_level_keywords": ["Kassel", "Hank Snow"]}')
    question = questions[0]["question"]
    async with make_rag(workdir, llm=llm) as rag:
        flight = InFlight(rag)
        alone = await rag.aquery(question, mode=mode, only_need_context=True)
        assert flight.most == at_once
        flight.most = 0
        every_doc = [d.id for d in (await rag.stores.doc_status.list_page(limit=10_000)).items]
        scoped = await rag.aquery(question, mode=mode, only_need_context=True, doc_ids=every_doc)
        assert flight.most == 1
        assert scoped.context == alone.context and alone.context


@pytest.mark.parametrize("mode, reads", [("local", 1), ("global", 1), ("hybrid", 2), ("mix", 2)])
async def test_local_and_global_read_the_graph_around_their_hits_once(workdir, questions, mode, reads):
    """Local reads its entities, their edges and every degree in one graph
    call, global its relations, their endpoints and their degrees
    (``GraphStore.context`` through the query's ``CachedGraph``): on a graph
    server each read is a round trip, and local made four, global three. The
    context is the one a scoped query over every document builds, whose view
    reads through the same cache."""
    llm = ScriptedLLM(script=lambda r: '{"high_level_keywords": ["history", "music"], '
                                       '"low_level_keywords": ["Kassel", "Hank Snow"]}')
    question = questions[0]["question"]
    async with make_rag(workdir, llm=llm) as rag:
        graph, calls = rag.stores.graph, []
        for name in ("get_nodes", "get_edges", "nodes_edges", "degrees", "edge_degrees", "context"):
            def counted(*args, _read=getattr(graph, name), _name=name, **kwargs):
                calls.append(_name)
                return _read(*args, **kwargs)
            setattr(graph, name, counted)
        alone = await rag.aquery(question, mode=mode, only_need_context=True)
        assert calls == ["context"] * reads, calls
        every_doc = [d.id for d in (await rag.stores.doc_status.list_page(limit=10_000)).items]
        scoped = await rag.aquery(question, mode=mode, only_need_context=True, doc_ids=every_doc)
        assert scoped.context == alone.context and alone.context


@pytest.mark.parametrize("scoped", [False, True])
async def test_a_failing_search_among_chains_at_once_raises_its_own_error(workdir, questions, scoped):
    """A store error in one chain reaches the caller as that error (the CLI
    and the server map ragkit's error types to exit codes and messages), not
    as an exception group; unscoped, the slower chains are cancelled, and
    scoped, the chains after it are closed unstarted (no "never awaited")."""
    llm = ScriptedLLM(script=lambda r: '{"high_level_keywords": ["history"], "low_level_keywords": ["Kassel"]}')
    finished = []

    async def down(*args, **kwargs):
        raise StoreError("relation index down")

    async with make_rag(workdir, llm=llm) as rag:
        slow_query = rag.stores.chunk_vectors.query

        async def slow(*args, **kwargs):
            await asyncio.sleep(0.5)
            finished.append(await slow_query(*args, **kwargs))

        rag.stores.relation_vectors.query = down
        rag.stores.chunk_vectors.query = slow
        scope = {"doc_ids": [d.id for d in (await rag.stores.doc_status.list_page(limit=10_000)).items]} if scoped else {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(StoreError, match="relation index down"):
                await rag.aquery(questions[0]["question"], mode="hybrid", only_need_context=True, **scope)
            await asyncio.sleep(0.6)
            gc.collect()
        assert finished == []
        assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]
