"""The KV contract's text-search tests (``Capability.TEXT_SEARCH``): see the
``[kv.text.*]`` rules in ``ragkit.protocols.kv.KVStore``."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from ragkit.errors import ConfigError, InvalidValueError
from ragkit.protocols.base import Capability
from ragkit.protocols.kv import KVStore
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import needs, reopened, sibling
from ragkit.testing.contracts.base.inputs import LARGE

FIELD = "text"


def indexed(store: KVStore, *, workspace: bool = False) -> contextlib.AbstractAsyncContextManager[Any]:
    """Another opened instance of the store's class, in a fresh namespace (and
    workspace), indexing ``FIELD``: dropped and closed on exit."""
    return sibling(store, namespace=True, workspace=workspace, text_field=FIELD)


def _keys(hits: list[tuple[str, float]]) -> list[str]:
    return [key for key, _ in hits]


def _filler(n: int) -> dict[str, dict[str, Any]]:
    """Records that share common words only: the background a real index has."""
    return {f"f{i:05d}": {FIELD: f"the city council met on day {i} to discuss roads and a budget"} for i in range(n)}


class KVTextSearchTests:
    @needs(Capability.TEXT_SEARCH)
    @checks("kv.text.finds")
    async def test_text_search_finds_the_records_sharing_a_word(self, adapter):
        """Among 1,500 records, ``search_text`` returns exactly the ones holding
        one of the question's words (case and inflection aside), at most
        ``top_k``, best first with equal scores in key order; records whose
        field is missing or not a string are stored but never found.

        Troubleshoot: match on the terms the base class gave ``_upsert_indexed``
        (not the raw text), OR the question's words, and let the base class
        sort: return ``(key, score)`` with higher scores better.
        """
        async with indexed(adapter) as store:
            await store.upsert({**_filler(1500),
                                "singer": {FIELD: "Hank Snow was a country singer from Nova Scotia."},
                                "singers": {FIELD: "Two singers toured with Hank Snow"},
                                "no-field": {"other": "Hank Snow"}, "not-text": {FIELD: ["Hank Snow"]}})
            assert await store.count() == 1504
            hits = await store.search_text("Which SINGER toured?", 10)
            assert sorted(_keys(hits)) == ["singer", "singers"], hits
            scores = [score for _, score in hits]
            assert scores == sorted(scores, reverse=True)
            assert _keys(await store.search_text("Hank", 1)) in (["singer"], ["singers"])
            assert await store.search_text("Hank Snow", 0) == []
            assert await store.search_text("who was the one?", 5) == []  # function words only
            assert _keys(await store.search_text("Nova Scotia", 5)) == ["singer"]
            council = await store.search_text("council", 5)
            assert _keys(council) == sorted(_keys(council)) == ["f00000", "f00001", "f00002", "f00003", "f00004"]
            assert await store.get("no-field") == {"other": "Hank Snow"}

    @needs(Capability.TEXT_SEARCH)
    @checks("kv.text.bm25")
    async def test_text_search_ranks_more_and_rarer_words_higher(self, adapter):
        """A record holding more of the question's words ranks higher; of
        two records holding one word each, the one with the rarer word; of
        two holding the same word, the one holding it more often, then the
        shorter one.

        Troubleshoot: ``_text_postings`` must give each record's exact count
        of each word and its exact number of terms (the base class computes
        BM25 from them): an index that only keeps which records hold a word
        (FTS5 ``detail=none``, a set per term) ties them all.
        """
        async with indexed(adapter) as store:
            await store.upsert({**_filler(50),
                                "both": {FIELD: "Kassel is a city in Hesse"},
                                "rare": {FIELD: "Kassel hosts the documenta exhibition"},
                                "common": {FIELD: "a city by the river with an old bridge"}})
            assert _keys(await store.search_text("Kassel city", 3)) == ["both", "rare", "common"]
            assert _keys(await store.search_text("city documenta", 2))[0] == "rare"
            await store.upsert({"a-once": {FIELD: "snow fell on the hills"}, "b-thrice": {FIELD: "snow, snow, snow!"},
                                "c-long": {FIELD: "hail over fields and pastures, lakes, roads and towns"},
                                "d-short": {FIELD: "hail storms"}})
            assert _keys(await store.search_text("snow", 2)) == ["b-thrice", "a-once"]
            assert _keys(await store.search_text("hail", 2)) == ["d-short", "c-long"]

    @needs(Capability.TEXT_SEARCH)
    @checks("kv.text.follows-writes")
    async def test_text_terms_follow_every_write(self, adapter):
        """An upsert replaces a record's words, ``delete`` and ``drop`` remove
        them, another workspace's records are never found, and the index
        survives a reopen (when the store is persistent).

        Troubleshoot: write the terms in the same transaction as the record
        and key them by the record (replace, not append); filter searches by
        workspace and namespace.
        """
        async with indexed(adapter) as store, indexed(adapter, workspace=True) as other:
            await store.upsert({"a": {FIELD: "alpha bravo"}, "b": {FIELD: "bravo charlie"}})
            await other.upsert({"a": {FIELD: "alpha delta"}})
            assert _keys(await store.search_text("delta", 5)) == []
            await store.upsert({"a": {FIELD: "echo foxtrot"}})
            assert _keys(await store.search_text("alpha", 5)) == []
            assert _keys(await store.search_text("echo", 5)) == ["a"]
            await store.upsert({"a": {"moved": "echo"}})
            assert _keys(await store.search_text("echo", 5)) == []
            await store.delete(["b"])
            assert _keys(await store.search_text("bravo charlie", 5)) == []
            await store.upsert({"c": {FIELD: "golf hotel"}})
            if Capability.PERSISTENT in type(store).capabilities:
                async with reopened(store) as again:
                    assert _keys(await again.search_text("hotel", 5)) == ["c"]
            await store.drop()
            assert await store.search_text("golf hotel", 5) == []
            assert _keys(await other.search_text("alpha", 5)) == ["a"]

    @needs(Capability.TEXT_SEARCH)
    @checks("kv.text.cjk")
    async def test_chinese_text_is_found_by_its_words(self, adapter):
        """Chinese records are found by a question that names one of their
        words inside a sentence without spaces, and not by an unrelated one.

        Troubleshoot: index the terms the base class gives (jieba's words),
        not your engine's own tokenisation of the raw text, which may treat a
        whole Chinese sentence as one token.
        """
        async with indexed(adapter) as store:
            await store.upsert({"apple": {FIELD: "苹果公司在加利福尼亚州库比蒂诺成立。"},
                                "river": {FIELD: "长江是中国最长的河流。"}})
            assert _keys(await store.search_text("苹果公司的总部在哪里？", 5)) == ["apple"]
            assert _keys(await store.search_text("最长的河流是哪条", 5)) == ["river"]
            assert await store.search_text("东京大学", 5) == []

    @needs(Capability.TEXT_SEARCH)
    @checks("kv.text.fills")
    async def test_records_stored_without_an_index_are_indexed_at_the_first_indexed_open(self, adapter):
        """Records an instance given no ``text_field`` stored (as a database
        written before text search holds them) are found once an instance
        given one opens over the same namespace: all 2,500 of them, past any
        backend's page of records to fill.

        Troubleshoot: at ``open()``, when the namespace was never indexed for
        this field, compute every stored record's terms (``ragkit.lexical.terms``)
        and store them; remember that it was done, so later opens cost nothing.
        """
        async with sibling(adapter, namespace=True) as plain:
            await plain.upsert({"old": {FIELD: "written before the index existed"}, "other": {"x": 1}})
            # More records than one page of any backend's fill: the last page is indexed too.
            await plain.upsert({f"r{i:05d}": {FIELD: f"record number {i} word{i}"} for i in range(LARGE)})
            indexed_config = plain.config.model_copy(update={"text_field": FIELD})
            again = type(adapter)(indexed_config)
            await again.open()
            try:
                assert _keys(await again.search_text("index existed", 5)) == ["old"]
                for i in (0, LARGE // 2, LARGE - 1):
                    assert _keys(await again.search_text(f"word{i}", 5)) == [f"r{i:05d}"]
                assert await again.count() == LARGE + 2
            finally:
                await again.close()

    @needs(Capability.TEXT_SEARCH)
    @checks("kv.text.field-change")
    async def test_an_instance_given_another_field_indexes_that_field(self, adapter):
        """A namespace indexed for one field, opened by an instance given
        another, is searched by the new field's words only; opened again with
        the first field, by the first field's words again.

        Troubleshoot: remember *which* field the namespace was filled for,
        not only that it was; a different field means filling it again.
        """
        async with indexed(adapter) as store:
            await store.upsert({"r": {FIELD: "alpine glacier", "title": "harbour lighthouse"}})
            for field, found, gone in (("title", "lighthouse", "glacier"), (FIELD, "glacier", "lighthouse")):
                again = type(adapter)(store.config.model_copy(update={"text_field": field}))
                await again.open()
                try:
                    assert _keys(await again.search_text(found, 5)) == ["r"], field
                    assert await again.search_text(gone, 5) == [], field
                finally:
                    await again.close()

    @needs(Capability.TEXT_SEARCH)
    @checks("kv.text.fills", "kv.text.follows-writes")
    async def test_records_a_plain_instance_writes_into_an_indexed_namespace_are_found_later(self, adapter):
        """An instance given no ``text_field`` writes into a namespace that is
        already indexed (a tool that only copies records): its records are
        found once an indexed instance opens again, and a record it replaced
        is no longer found by its old words.

        Troubleshoot: a write without terms must undo "this namespace is
        filled", so the next indexed open fills the rows that lack terms.
        """
        async with indexed(adapter) as store:
            await store.upsert({"kept": {FIELD: "meadow orchard"}, "replaced": {FIELD: "copper mine"}})
            plain = type(adapter)(store.config.model_copy(update={"text_field": None}))
            await plain.open()
            try:
                await plain.upsert({"new": {FIELD: "granite quarry"}, "replaced": {FIELD: "silver river"}})
            finally:
                await plain.close()
            # At once, before any fill: the replaced record's old words are gone ([kv.text.follows-writes]).
            assert await store.search_text("copper", 5) == []
            async with reopened(store) as again:
                assert _keys(await again.search_text("granite", 5)) == ["new"]
                assert _keys(await again.search_text("silver", 5)) == ["replaced"]
                assert await again.search_text("copper", 5) == []
                assert _keys(await again.search_text("orchard", 5)) == ["kept"]

    @needs(Capability.TEXT_SEARCH)
    async def test_text_search_needs_a_field_and_a_valid_top_k(self, adapter):
        """Without a ``text_field`` in its config the store has no text index
        and ``search_text`` says so; ``top_k`` must be a whole number >= 0.

        Troubleshoot: these checks are the base class's; do not override
        ``search_text`` (implement ``_search_text``).
        """
        assert not adapter.indexes_text
        with pytest.raises(ConfigError, match="text_field"):
            await adapter.search_text("anything", 5)
        async with indexed(adapter) as store:
            for bad in (-1, 2.5, True, "5"):
                with pytest.raises(InvalidValueError, match="top_k"):
                    await store.search_text("anything", bad)
