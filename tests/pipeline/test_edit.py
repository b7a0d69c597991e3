"""Graph editing on the embedded stores, over 20 MuSiQue passages (replay LLM).

Every edit must (1) leave ``check`` clean with every vector embedding its
element's current text, and (2) live in the extraction fragments, so that
recomputing every node and edge from the fragments changes nothing and deleting
documents keeps the edit wherever sources remain. When a test fails, first see
which of the two helpers failed: ``assert_in_sync`` names the stale element,
``assert_recompute_is_noop`` means the edit changed the graph but not the facts.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ragkit import ids
from ragkit.errors import ElementExistsError, ElementNotFoundError, GraphEditError
from ragkit.pipeline.check import check
from ragkit.pipeline.edit import CustomKG, GraphEditor
from ragkit.pipeline.graph_update import Changes
from ragkit.pipeline.index import IndexConfig
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot

N_DOCS = 20
PUBLISHER = "springer science+business media"  # 3 sources among the 20 passages
APA = "american psychological association"  # 3 sources
MERGE_SOURCE, MERGE_TARGET = "peer-reviewed", "peer-reviewed academic journal"  # share a chunk


@pytest.fixture(scope="module")
def passages() -> list[Document]:
    corpus = load_musique()[0]
    return [Document.from_text(p["title"] + "\n" + p["text"]) for p in corpus[:N_DOCS]]


@pytest.fixture
async def rag(tmp_path, passages):
    rag = RAG(
        Settings(working_dir=tmp_path),
        llm=ReplayLLM(),
        embedder=HashEmbedder({"dimension": 32}),
        index=IndexConfig(llm_concurrency=4),
    )
    async with rag:
        report = await rag.indexer().insert(passages)
        assert len(report.processed) == N_DOCS
        yield rag


def editor(rag: RAG) -> GraphEditor:
    return rag.editor()


async def graph(rag: RAG) -> tuple[dict, dict]:
    nodes = {n.id: n.properties async for n in rag.stores.graph.nodes()}
    edges = {e.key: e.properties async for e in rag.stores.graph.edges()}
    return nodes, edges


async def assert_in_sync(rag: RAG) -> None:
    """``check`` is clean and each vector embeds what ``graph_update`` embeds for
    the element now (a stale vector means an edit skipped a recompute)."""
    report = await check(rag.stores)
    assert report.problems == [], report.problems
    nodes, edges = await graph(rag)
    expected = {
        rag.stores.entity_vectors: {ids.entity_id(k): f"{p['name']}\n{p['description']}" for k, p in nodes.items()},
        rag.stores.relation_vectors: {
            ids.relation_id(*k): f"{p['keywords']}\t{p['source']}\n{p['target']}\n{p['description']}"
            for k, p in edges.items()
        },
    }
    for store, texts in expected.items():
        assert {i async for i in store.ids()} == set(texts)
        records = await store.get(list(texts))
        wanted = await rag.embedder.embed(list(texts.values()))
        for vec_id, rec, want in zip(texts, records, wanted):
            got = np.asarray(rec.vector)
            cosine = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
            assert cosine > 0.999, f"stale vector {vec_id}"


async def assert_recompute_is_noop(rag: RAG) -> None:
    """Recomputing every node and edge from the stored fragments (what delete
    and repair do) must give the graph as it is."""
    before = await store_snapshot(rag.stores)
    nodes, edges = await graph(rag)
    await rag.indexer().updater.apply(Changes(entities=set(nodes), relations=set(edges)))
    assert await store_snapshot(rag.stores) == before


async def doc_of(rag: RAG, chunk_id: str) -> str:
    return (await rag.stores.chunks.get(chunk_id))["doc_id"]


async def neighbours(rag: RAG, key: str) -> set[str]:
    return {b if a == key else a for a, b in await rag.stores.graph.node_edges(key) or []}


# -- merge -----------------------------------------------------------------------------


async def test_merge_moves_edges_sources_and_descriptions(rag):
    g = rag.stores.graph
    src, dst = await g.get_node(MERGE_SOURCE), await g.get_node(MERGE_TARGET)
    assert set(src["source_ids"]) & set(dst["source_ids"]), "the fixture pair must share a chunk"
    src_nbrs, dst_nbrs = await neighbours(rag, MERGE_SOURCE), await neighbours(rag, MERGE_TARGET)

    merged = await editor(rag).merge_entities([MERGE_SOURCE], MERGE_TARGET)

    assert await g.get_node(MERGE_SOURCE) is None
    assert merged["name"] == dst["name"] and merged["type"] == dst["type"]
    assert set(merged["source_ids"]) == set(src["source_ids"]) | set(dst["source_ids"])
    lines = set(merged["description"].splitlines())
    assert set(src["description"].splitlines()) | set(dst["description"].splitlines()) <= lines
    # Edges moved; an edge between the two would be a self-loop and is dropped.
    assert await neighbours(rag, MERGE_TARGET) == (src_nbrs | dst_nbrs) - {MERGE_SOURCE, MERGE_TARGET}
    assert await g.get_edge(MERGE_TARGET, MERGE_TARGET) is None
    assert await rag.stores.entity_vectors.get([ids.entity_id(MERGE_SOURCE)]) == [None]
    await assert_in_sync(rag)
    await assert_recompute_is_noop(rag)

    # Deleting a document that supported only the merged-away entity keeps the merge.
    only_src = sorted(set(src["source_ids"]) - set(dst["source_ids"]))[0]
    await rag.adelete([await doc_of(rag, only_src)])
    after = await g.get_node(MERGE_TARGET)
    assert set(after["source_ids"]) == set(merged["source_ids"]) - {only_src}
    assert await g.get_node(MERGE_SOURCE) is None
    await assert_in_sync(rag)


async def test_merge_errors_name_the_problem(rag):
    ed = editor(rag)
    with pytest.raises(GraphEditError, match="at least two"):
        await ed.merge_entities([MERGE_TARGET], MERGE_TARGET)
    with pytest.raises(ElementNotFoundError, match="rename_entity"):
        await ed.merge_entities([MERGE_SOURCE], "no such journal")
    with pytest.raises(ElementNotFoundError, match="no such journal"):
        await ed.merge_entities([MERGE_SOURCE, "no such journal"], MERGE_TARGET)
    assert await rag.stores.graph.get_node(MERGE_SOURCE) is not None, "a failed merge must change nothing"


# -- edit entity -------------------------------------------------------------------------


async def test_entity_edit_survives_deleting_unrelated_and_supporting_documents(rag):
    before = await rag.stores.graph.get_node(PUBLISHER)
    assert len(before["source_ids"]) == 3
    await editor(rag).edit_entity(PUBLISHER, description="A publisher of academic journals.", type="Organization")
    await assert_in_sync(rag)
    await assert_recompute_is_noop(rag)

    def assert_edit_kept(props: dict) -> None:
        assert props["description"] == "A publisher of academic journals."
        assert props["type"] == "organization"  # merge lower-cases types
        assert props["name"] == before["name"]

    supporting = {await doc_of(rag, c) for c in before["source_ids"]}
    unrelated = next(d.id for d in await _docs(rag) if d.id not in supporting)
    await rag.adelete([unrelated])
    after_unrelated = await rag.stores.graph.get_node(PUBLISHER)
    assert_edit_kept(after_unrelated)
    assert after_unrelated["source_ids"] == before["source_ids"]

    await rag.adelete([await doc_of(rag, before["source_ids"][0])])
    after_supporting = await rag.stores.graph.get_node(PUBLISHER)
    assert_edit_kept(after_supporting)
    assert after_supporting["source_ids"] == before["source_ids"][1:]
    await assert_in_sync(rag)
    repaired = await check(rag.stores, rag.indexer().updater, repair=True)
    assert repaired.problems == []
    assert_edit_kept(await rag.stores.graph.get_node(PUBLISHER))


async def _docs(rag: RAG) -> list:
    page = await rag.stores.doc_status.list_page(None, 100)
    return page.items


async def test_edit_needs_something_to_change_and_an_existing_entity(rag):
    with pytest.raises(GraphEditError, match="nothing to change"):
        await editor(rag).edit_entity(PUBLISHER)
    with pytest.raises(ElementNotFoundError, match="create_entity"):
        await editor(rag).edit_entity("nobody", description="x")
    with pytest.raises(GraphEditError, match="type cannot be empty"):
        await editor(rag).edit_entity(PUBLISHER, type=" ")


# -- rename -----------------------------------------------------------------------------------


async def test_rename_moves_node_edges_and_vectors(rag):
    g = rag.stores.graph
    before = await g.get_node(APA)
    nbrs = await neighbours(rag, APA)
    assert nbrs, "the fixture entity must have relations"
    old_edges = {n: await g.get_edge(APA, n) for n in nbrs}
    renamed = await editor(rag).rename_entity(APA, "APA")

    assert await g.get_node(APA) is None
    assert renamed["name"] == "APA" and renamed["source_ids"] == before["source_ids"]
    assert renamed["description"] == before["description"] and renamed["type"] == before["type"]
    assert await neighbours(rag, "apa") == nbrs
    for n in nbrs:
        assert await g.get_edge(APA, n) is None
        moved = await g.get_edge("apa", n)
        for prop in ("description", "keywords", "weight", "source_ids"):
            assert moved[prop] == old_edges[n][prop]
        assert "APA" in (moved["source"], moved["target"]), "display names come from the fragments, not the keys"
    await assert_in_sync(rag)
    await assert_recompute_is_noop(rag)

    # A case-only rename keeps the node id and changes the display name.
    assert (await editor(rag).rename_entity("apa", "Apa"))["name"] == "Apa"
    await rag.adelete([await doc_of(rag, before["source_ids"][0])])
    assert (await g.get_node("apa"))["name"] == "Apa"
    await assert_in_sync(rag)


async def test_rename_onto_an_existing_entity_suggests_merge(rag):
    with pytest.raises(ElementExistsError, match=r"merge_entities\(\["):
        await editor(rag).rename_entity(APA, PUBLISHER)
    with pytest.raises(ElementNotFoundError):
        await editor(rag).rename_entity("nobody", "somebody")


# -- create / delete ------------------------------------------------------------------------


async def test_create_and_delete_relation_round_trip(rag):
    a, b = "climate dynamics", "the wall street journal"
    g = rag.stores.graph
    assert await g.get_edge(a, b) is None
    before = await store_snapshot(rag.stores)

    edge = await editor(rag).create_relation(a, b, "cited by", "The Wall Street Journal cited Climate Dynamics.", 2.5)
    assert edge["weight"] == 2.5 and edge["keywords"] == "cited by"
    (manual,) = edge["source_ids"]
    chunk = await rag.stores.chunks.get(manual)
    assert chunk["doc_id"] == "manual" and "cited Climate Dynamics" in chunk["content"]
    for key in (a, b):  # the endpoints gain the source but keep type and description
        node = await g.get_node(key)
        assert manual in node["source_ids"]
        assert node["description"] == before["nodes"][key]["description"]
        assert node["type"] == before["nodes"][key]["type"]
    with pytest.raises(ElementExistsError, match="edit_relation"):
        await editor(rag).create_relation(b, a)
    await assert_in_sync(rag)
    await assert_recompute_is_noop(rag)

    edited = await editor(rag).edit_relation(b, a, description="Edited.", weight=4.0)
    assert edited["description"] == "Edited." and edited["weight"] == 4.0
    assert "Edited." in (await rag.stores.chunks.get(manual))["content"], "manual text follows edits"
    await assert_in_sync(rag)

    await editor(rag).delete_relation(b, a)
    assert await store_snapshot(rag.stores) == before, "deleting the created relation must undo it exactly"


async def test_delete_real_relation_and_edit_one_with_several_sources(rag):
    nodes, edges = await graph(rag)
    pair = next(k for k, p in edges.items() if len(p["source_ids"]) == 1)
    await editor(rag).delete_relation(*pair)
    assert await rag.stores.graph.get_edge(*pair) is None
    assert all(await rag.stores.graph.get_nodes(list(pair))), "endpoints stay"
    await assert_in_sync(rag)
    await assert_recompute_is_noop(rag)
    # The deletion is a fact of the chunk now: deleting an unrelated document keeps it.
    others = [d.id for d in await _docs(rag) if d.id != await doc_of(rag, edges[pair]["source_ids"][0])]
    await rag.adelete(others[:2])
    assert await rag.stores.graph.get_edge(*pair) is None
    with pytest.raises(ElementNotFoundError, match="create_relation"):
        await editor(rag).delete_relation(*pair)


async def test_create_entity_lives_until_deleted(rag):
    before = await store_snapshot(rag.stores)
    node = await editor(rag).create_entity("Ragkit", "Software", "A graph-RAG framework.")
    assert node == {
        "name": "Ragkit", "type": "software", "description": "A graph-RAG framework.",
        "source_ids": node["source_ids"],
    }
    assert node["source_ids"][0].startswith("manual-")
    with pytest.raises(ElementExistsError, match="edit_entity"):
        await editor(rag).create_entity("RAGKIT")
    with pytest.raises(ElementNotFoundError, match="create_entity"):
        await editor(rag).create_relation("ragkit", "no such thing")
    await assert_in_sync(rag)

    # Documents come and go; the manual entity stays.
    await rag.adelete([d.id for d in (await _docs(rag))[:5]])
    assert (await rag.stores.graph.get_node("ragkit"))["description"] == "A graph-RAG framework."
    await assert_recompute_is_noop(rag)

    await editor(rag).delete_entity("ragkit")
    after = await store_snapshot(rag.stores)
    assert "ragkit" not in after["nodes"] and node["source_ids"][0] not in after["chunks"]
    assert await rag.stores.extractions.get(node["source_ids"][0]) is None
    assert before["nodes"].keys() - after["nodes"].keys(), "5 documents were deleted meanwhile"
    await assert_in_sync(rag)


async def test_delete_entity_removes_its_relations_and_stays_deleted(rag):
    key = "climate dynamics"
    nbrs = await neighbours(rag, key)
    assert len(nbrs) > 5
    (chunk,) = (await rag.stores.graph.get_node(key))["source_ids"]
    await editor(rag).delete_entity(key)
    assert await rag.stores.graph.get_node(key) is None
    assert all(await rag.stores.graph.get_nodes(sorted(nbrs))), "neighbours are entities of the chunk too"
    assert not any(await rag.stores.graph.get_edges([(key, n) for n in nbrs]))
    await assert_in_sync(rag)
    await assert_recompute_is_noop(rag)
    await rag.adelete([d.id for d in await _docs(rag) if d.id != await doc_of(rag, chunk)][:3])
    assert await rag.stores.graph.get_node(key) is None


# -- custom knowledge graphs ----------------------------------------------------------------


def custom_kg() -> CustomKG:
    return CustomKG.model_validate({
        "doc_id": "notes-1",
        "chunks": [
            {"id": "c1", "content": "Ragkit stores its graph in NetworkX.", "file_path": "notes.md"},
            {"id": "c2", "content": "Springer Science+Business Media publishes Climate Dynamics."},
        ],
        "entities": [
            {"name": "Ragkit", "type": "software", "description": "A graph-RAG framework.", "source_ids": ["c1"]},
            {"name": "NetworkX", "type": "software", "description": "A graph library.", "source_ids": ["c1"]},
            {"name": "Springer Science+Business Media", "type": "organization",
             "description": "Publishes Climate Dynamics.", "source_ids": ["c2"]},
        ],
        "relations": [
            {"source": "Ragkit", "target": "NetworkX", "keywords": "uses", "description": "Ragkit uses NetworkX.",
             "strength": 3, "source_ids": ["c1"]},
            # "Climate Dynamics" is no entity of the KG: it becomes one of chunk c2.
            {"source": "Springer Science+Business Media", "target": "Climate Dynamics", "keywords": "publishes",
             "description": "Springer publishes Climate Dynamics.", "source_ids": ["c2"]},
        ],
    })


async def test_custom_kg_insert_query_reinsert_and_delete(rag):
    before = await store_snapshot(rag.stores)
    publisher = await rag.stores.graph.get_node(PUBLISHER)
    report = await rag.ainsert_custom_kg(custom_kg())
    assert report.doc_ids == ["notes-1"] and len(report.chunk_ids) == 2
    c1, c2 = report.chunk_ids
    g = rag.stores.graph

    ragkit = await g.get_node("ragkit")
    assert ragkit == {"name": "Ragkit", "type": "software", "description": "A graph-RAG framework.", "source_ids": [c1]}
    edge = await g.get_edge("networkx", "ragkit")
    assert edge["weight"] == 3.0 and edge["keywords"] == "uses" and edge["source_ids"] == [c1]
    # Facts about an existing entity merge with what the passages say.
    merged = await g.get_node(PUBLISHER)
    assert set(merged["source_ids"]) == set(publisher["source_ids"]) | {c2}
    assert "Publishes Climate Dynamics." in merged["description"].splitlines()
    assert publisher["description"].splitlines()[0] in merged["description"]
    climate = await g.get_node("climate dynamics")
    assert c2 in climate["source_ids"] and climate["description"] == before["nodes"]["climate dynamics"]["description"]
    assert (await rag.stores.chunks.get(c1))["file_path"] == "notes.md"
    assert (await rag.astatus())["processed"] == N_DOCS + 1
    (query,) = await rag.embedder.embed(["Ragkit stores its graph in NetworkX."])
    assert (await rag.stores.chunk_vectors.query(query, 1))[0].id == c1, "custom chunks are searchable"
    await assert_in_sync(rag)
    await assert_recompute_is_noop(rag)

    after = await store_snapshot(rag.stores)
    await rag.ainsert_custom_kg(custom_kg())
    assert await store_snapshot(rag.stores) == after, "inserting the same KG again must change nothing"

    assert await rag.adelete(["notes-1"]) == ["notes-1"]
    assert await store_snapshot(rag.stores) == before, "deleting the KG's document must remove all of it"


async def test_custom_kg_errors(rag):
    kg = custom_kg()
    bad = kg.model_copy(update={"entities": [kg.entities[0].model_copy(update={"source_ids": ["c9"]})]})
    with pytest.raises(GraphEditError, match="'c9'"):
        await rag.ainsert_custom_kg(bad)
    await rag.ainsert_custom_kg(kg)
    other = kg.model_copy(update={"chunks": kg.chunks[:1], "entities": kg.entities[:2], "relations": kg.relations[:1]})
    with pytest.raises(ElementExistsError, match="delete it first"):
        await rag.ainsert_custom_kg(other)
    two_chunks_no_sources = CustomKG.model_validate({
        "chunks": [{"content": "a"}, {"content": "b"}], "entities": [{"name": "X"}],
    })
    with pytest.raises(GraphEditError, match="source_ids"):
        await rag.ainsert_custom_kg(two_chunks_no_sources)
    await assert_in_sync(rag)


def test_sync_api_on_a_small_custom_kg(tmp_path):
    """The sync wrappers on a workspace built from a custom KG alone (no passages)."""
    rag = RAG(Settings(working_dir=tmp_path), llm=ReplayLLM(), embedder=HashEmbedder({"dimension": 32}))
    kg = {"chunks": [{"content": "Ada Lovelace worked with Charles Babbage."}],
          "entities": [{"name": "Ada Lovelace", "type": "person"}, {"name": "Charles Babbage", "type": "person"}],
          "relations": [{"source": "Ada Lovelace", "target": "Charles Babbage", "keywords": "collaboration"}]}
    (doc_id,) = rag.insert_custom_kg(kg).doc_ids
    assert doc_id.startswith("custom-doc-")
    rag.create_entity("Analytical Engine", "machine", "A mechanical computer.")
    rag.create_relation("Charles Babbage", "Analytical Engine", "designed", "Babbage designed it.")
    rag.merge_entities(["Ada Lovelace"], "Charles Babbage")  # their relation would be a self-loop
    node = rag.rename_entity("Charles Babbage", "Babbage")
    assert node["type"] == "person" and len(node["source_ids"]) == 2
    assert rag.delete([doc_id]) == [doc_id]
    # Only the manual relation's chunk still names Babbage; the edit makes it say more.
    node = rag.edit_entity("babbage", description="Designer of the Analytical Engine.")
    assert len(node["source_ids"]) == 1 and node["source_ids"][0].startswith("manual-")
    rag.delete_relation("babbage", "analytical engine")
    assert rag.status()["processed"] == 0
    rag.close()  # the stores move to this test's loop, where assert_in_sync reads them directly

    async def final() -> tuple[dict, dict]:
        async with rag:
            await assert_in_sync(rag)
            return await graph(rag)

    nodes, edges = asyncio.run(final())
    assert set(nodes) == {"analytical engine", "babbage"} and edges == {}
    assert nodes["babbage"]["description"] == "Designer of the Analytical Engine."
