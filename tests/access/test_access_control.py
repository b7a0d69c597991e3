"""Document access control through the Python API: a principal's queries (every
mode, context and answer), listings, graph reads and exports show nothing
derived from a document it may not read, and agree with an index of only the
documents it may read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.access import AccessList, Principal
from ragkit.core.keys import entity_key
from ragkit.errors import InvalidValueError
from ragkit.plugins import get_registry

from .conftest import (
    ALICE, BOB, MALLORY, PUBLIC, READERS, SECRET, TEAM, assert_clean, make_rag,
)

QUESTION = "What is Project Falcon, who leads it, and what is based in Harbor City?"
MODES = sorted(get_registry().names("query_mode"))
ZEPHYR = entity_key("Zephyr Dynamics")


def shown(result) -> str:
    """Everything a response carries that came from the index."""
    data = result.model_dump(exclude={"metadata"})
    return json.dumps(data, ensure_ascii=False) + (result.answer or "") + (result.prompt or "")


def test_mode_list_covers_the_built_ins():
    assert {"local", "global", "hybrid", "naive", "mix", "ppr", "bypass"} <= set(MODES)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("output", ["context", "prompt", "answer"])
async def test_no_canary_entity_degree_or_reference_from_unreadable_documents(
    acl_workdir, oracles, mode, reader, output
):
    principal, readable = READERS[reader]
    options = {"context": {"only_need_context": True}, "prompt": {"only_need_prompt": True}, "answer": {}}[output]
    async with make_rag(acl_workdir) as rag:
        result = await rag.aquery(QUESTION, mode=mode, principal=principal, **options)
    async with make_rag(oracles[reader]) as oracle:
        want = await oracle.aquery(QUESTION, mode=mode, only_need_context=True)
        oracle_degrees = {e["key"]: e["degree"] for e in want.entities}
        for e in want.entities:
            assert e["degree"] == (await oracle.stores.graph.degrees([e["key"]]))[0]
    assert_clean(shown(result), f"{mode} {output} for {reader}")
    assert ZEPHYR not in {e["key"] for e in result.entities}
    assert all(ZEPHYR not in r["key"] for r in result.relations)
    allowed = {d.id for d in readable}
    assert {r.doc_id for r in result.references} <= {r.doc_id for r in result.sources} <= allowed
    assert {c["doc_id"] for c in result.chunks} <= allowed
    for entity in result.entities:  # degrees count readable edges only: as if only those documents existed
        assert entity["degree"] == oracle_degrees.get(entity["key"], entity["degree"])
    if output == "context" and mode != "bypass":
        # The same entities, relations and chunks as an index of only the readable documents.
        assert {e["key"] for e in result.entities} == {e["key"] for e in want.entities}
        assert {tuple(r["key"]) for r in result.relations} == {tuple(r["key"]) for r in want.relations}
        assert {c["id"] for c in result.chunks} == {c["id"] for c in want.chunks}
        for got, exp in zip(sorted(result.entities, key=lambda e: e["key"]),
                            sorted(want.entities, key=lambda e: e["key"])):
            assert (got["description"], got["degree"], got["source_ids"]) == \
                (exp["description"], exp["degree"], exp["source_ids"])


async def test_a_merged_entity_is_described_and_counted_from_readable_sources_only(acl_index):
    async with make_rag(acl_index) as rag:
        everything = await rag.aentity("Project Falcon")
        alice = await rag.aentity("Project Falcon", principal=ALICE)
        bob = await rag.aentity("Project Falcon", principal=BOB)
        mallory = await rag.aentity("Project Falcon", principal=MALLORY)
        city = await rag.aentity("Harbor City", principal=BOB)
    # The unrestricted read shows the canary: the corpus does test something.
    assert "CANARY-ORCHID-7731" in everything.properties["description"] and everything.degree == 3
    assert alice is not None and alice.degree == 2
    assert_clean(alice.model_dump_json(), "alice's Project Falcon")
    assert [s.doc_id for s in alice.sources] == [TEAM.id]
    assert bob is None  # only TEAM and SECRET mention it: for bob it does not exist
    assert mallory is not None and mallory.degree == 1 and [s.doc_id for s in mallory.sources] == [SECRET.id]
    assert city is not None and city.degree == 1 and [s.doc_id for s in city.sources] == [PUBLIC.id]
    assert_clean(city.model_dump_json(), "bob's Harbor City")


@pytest.mark.parametrize("reader", sorted(READERS))
async def test_graph_reads_hide_what_only_unreadable_documents_say(acl_index, reader):
    principal, readable = READERS[reader]
    async with make_rag(acl_index) as rag:
        assert await rag.asearch_entities("zeph") == [ZEPHYR]  # it is there, unrestricted
        assert await rag.asearch_entities("zeph", principal=principal) == []
        assert await rag.aentity("Zephyr Dynamics", principal=principal) is None
        assert await rag.arelation("Project Falcon", "Zephyr Dynamics", principal=principal) is None
        assert await rag.arelation("Harbor City", "Zephyr Dynamics", principal=principal) is None
        found = await rag.asearch_entities("harbor", principal=principal)
        assert entity_key("Harbor City") in found
        sub = await rag.asubgraph("Harbor City", depth=3, principal=principal)
        full = await rag.asubgraph("Harbor City", depth=3)
        relation = await rag.arelation("Harbor City", "Harbor Council", principal=principal)
    assert ZEPHYR in {n.id for n in full.nodes}
    assert_clean(sub.model_dump_json(), f"{reader}'s subgraph")
    assert ZEPHYR not in {n.id for n in sub.nodes}
    allowed_chunks = {c for d in readable for c in await _chunks(acl_index, d.id)}
    for item in [*sub.nodes, *sub.edges]:
        assert set(item.properties["source_ids"]) <= allowed_chunks
    assert relation is not None and [s.doc_id for s in relation.sources] == [PUBLIC.id]


async def _chunks(folder: Path, doc_id: str) -> list[str]:
    async with make_rag(folder) as rag:
        (record,) = await rag.stores.doc_status.get([doc_id])
        return record.chunk_ids


async def test_subgraph_limits(acl_index):
    async with make_rag(acl_index) as rag:
        small = await rag.asubgraph("Harbor City", depth=2, max_nodes=2, max_edges=1)
        with pytest.raises(InvalidValueError, match="max_nodes"):
            await rag.asubgraph("Harbor City", max_nodes=0)
        assert (await rag.asubgraph("nobody at all")).nodes == []
    assert len(small.nodes) == 2 and len(small.edges) <= 1 and small.truncated


@pytest.mark.parametrize("reader", sorted(READERS))
async def test_documents_listing_shows_readable_documents_only(acl_index, reader):
    principal, readable = READERS[reader]
    async with make_rag(acl_index) as rag:
        page = await rag.adocuments(principal=principal)
        first = await rag.adocuments(principal=principal, limit=1)
        rest = await rag.adocuments(principal=principal, limit=1, cursor=first.next_cursor) if first.next_cursor else None
        everything = await rag.adocuments()
        counts = await rag.astatus(principal=principal)
    assert everything.total == 3
    assert counts["processed"] == len(readable) and sum(counts.values()) == len(readable)
    assert {d.id for d in page.documents} == {d.id for d in readable}
    assert page.total == len(readable) and first.total == len(readable)
    assert_clean(page.model_dump_json(), f"{reader}'s listing")
    paged = [d.id for d in first.documents] + ([d.id for d in rest.documents] if rest else [])
    assert sorted(paged) == sorted(d.id for d in readable)


@pytest.mark.parametrize("fmt", ["json", "csv", "graphml"])
@pytest.mark.parametrize("reader", sorted(READERS))
async def test_export_holds_readable_data_only(acl_index, tmp_path, fmt, reader):
    principal, readable = READERS[reader]
    target = tmp_path / ({"json": "out.json", "csv": "out", "graphml": "out.graphml"}[fmt])
    async with make_rag(acl_index) as rag:
        summary = await rag.aexport(target, principal=principal)
        whole = await rag.aexport(tmp_path / f"all.{fmt}" if fmt != "csv" else tmp_path / "all")
    files = sorted(target.iterdir()) if target.is_dir() else [target]
    text = "".join(f.read_text(encoding="utf-8") for f in files)
    assert_clean(text, f"{reader}'s {fmt} export")
    assert SECRET.id not in text
    assert summary.entities < whole.entities and summary.relations < whole.relations
    if fmt == "json":
        data = json.loads(text)
        assert {c["doc_id"] for c in data["chunks"]} <= {d.id for d in readable}


async def test_doc_ids_narrow_but_never_widen(acl_index):
    async with make_rag(acl_index) as rag:
        only_secret = await rag.aquery(QUESTION, mode="mix", principal=BOB, only_need_context=True,
                                       doc_ids=[SECRET.id])
        both = await rag.aquery(QUESTION, mode="mix", principal=ALICE, only_need_context=True,
                                doc_ids=[SECRET.id, PUBLIC.id])
        filtered = await rag.aquery(QUESTION, mode="local", principal=BOB, only_need_context=True,
                                    doc_filter={"kind": "secret"})
        team = await rag.aquery(QUESTION, mode="mix", principal=ALICE, only_need_context=True,
                                doc_filter={"kind": {"$in": ["team", "secret"]}})
    assert only_secret.context == "" and not only_secret.entities and not only_secret.chunks
    assert_clean(shown(both), "doc_ids naming an unreadable document")
    assert {c["doc_id"] for c in both.chunks} == {PUBLIC.id}  # narrowed to PUBLIC, TEAM dropped too
    assert filtered.context == "" and not filtered.entities
    assert_clean(shown(team), "doc_filter")
    assert {c["doc_id"] for c in team.chunks} == {TEAM.id}


async def test_the_answer_cache_never_serves_one_principals_answer_to_another(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        # Same prompt for everyone (bypass shows no context): kept apart by scope alone.
        first = await rag.aquery(QUESTION, mode="bypass", principal=MALLORY)
        again = await rag.aquery(QUESTION, mode="bypass", principal=MALLORY)
        other = await rag.aquery(QUESTION, mode="bypass", principal=BOB)
        assert "answer" in again.metadata["cache_hits"]
        assert "answer" not in other.metadata["cache_hits"]
        # An answer made from the secret document is cached, and never reaches bob.
        leaked = await rag.aquery(QUESTION, mode="mix", principal=MALLORY)
        assert "CANARY-ORCHID-7731" in leaked.answer
        for principal in (BOB, ALICE):
            answer = await rag.aquery(QUESTION, mode="mix", principal=principal)
            assert_clean(answer.answer, "a cached answer")
            assert "answer" not in answer.metadata["cache_hits"]
    assert first.answer == again.answer


async def test_a_principal_reading_everything_reads_unrestricted(tmp_path):
    from .conftest import abuild

    folder = await abuild(tmp_path / "open", [PUBLIC, TEAM])
    async with make_rag(folder) as rag:
        unscoped = await rag.aquery(QUESTION, mode="mix", only_need_context=True)
        scoped = await rag.aquery(QUESTION, mode="mix", only_need_context=True,
                                  principal=Principal(user="x", groups=frozenset({"falcon"})))
    assert scoped.context == unscoped.context


async def test_access_lists_are_stored_and_kept_on_reinsert(tmp_path):
    async with make_rag(tmp_path / "w") as rag:
        await rag.ainsert(SECRET.content, access=AccessList(groups=["exec"]))
        (record,) = await rag.stores.doc_status.get([SECRET.id])
        assert record.access == AccessList(groups=["exec"])
        await rag.ainsert(SECRET.content)  # no list given: the one it has stays
        (record,) = await rag.stores.doc_status.get([SECRET.id])
        assert record.access == AccessList(groups=["exec"])
        await rag.ainsert(SECRET.content, access=AccessList())  # an empty list: everyone, on purpose
        (record,) = await rag.stores.doc_status.get([SECRET.id])
        assert record.access == AccessList() and record.access.allows(BOB)


def test_names_are_validated():
    with pytest.raises(ValueError, match="control"):
        AccessList(users=["al\x00ice"])
    with pytest.raises(ValueError, match="at most"):
        Principal(user="x" * 300)
    with pytest.raises(ValueError, match="list of names"):
        AccessList(groups="exec")
    with pytest.raises(ValueError, match="whitespace"):
        Principal(user=" bob")
    assert AccessList(users=["b", "a", "a"]).users == ["a", "b"]
    assert AccessList(groups=["g"]).allows(Principal(user="u", groups=frozenset({"g"})))
    assert not AccessList(users=["v"]).allows(Principal(user="u"))
    assert AccessList().allows(Principal(user="u"))


RANKED_MODES = ["local", "global", "hybrid", "mix", "ppr"]


@pytest.mark.parametrize("mode", RANKED_MODES)
@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("top_k", [1, 2])
async def test_rankings_are_those_of_the_readable_documents_alone(acl_index, oracles, mode, reader, top_k):
    """Keywords worded like the secret document: the merged descriptions'
    stored vectors rank Project Falcon and Harbor City by its text; a reader's
    search ranks them by what it may read, as an index of only that would."""
    principal, _ = READERS[reader]
    asked = dict(mode=mode, only_need_context=True, top_k=top_k, chunk_top_k=1,
                 low_level_keywords=["merges with Zephyr Dynamics merger-plan code"],
                 high_level_keywords=["merger-plan acquires code"])
    async with make_rag(acl_index) as rag:
        got = await rag.aquery(QUESTION, principal=principal, **asked)
    async with make_rag(oracles[reader]) as oracle:
        want = await oracle.aquery(QUESTION, **asked)
    assert [(e["key"], e["degree"]) for e in got.entities] == [(e["key"], e["degree"]) for e in want.entities]
    assert [e["score"] for e in got.entities] == pytest.approx([e["score"] for e in want.entities], abs=1e-5)
    assert [tuple(r["key"]) for r in got.relations] == [tuple(r["key"]) for r in want.relations]
    assert [r["score"] for r in got.relations] == pytest.approx([r["score"] for r in want.relations], abs=1e-5)
    assert [c["id"] for c in got.chunks] == [c["id"] for c in want.chunks]
