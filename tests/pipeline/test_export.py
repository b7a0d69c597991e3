"""Export to JSON, GraphML and CSV, read back and compared with the stores.

The workspace holds 20 MuSiQue passages (replay LLM), a custom KG and a manual
entity, so every kind of source chunk is exported. A count mismatch usually
means an element was skipped while streaming; a property mismatch, that lists
were not joined with ``LIST_SEPARATOR`` (GraphML, CSV) or were joined twice.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os

import networkx as nx
import pytest

from ragkit.cli.main import main
from ragkit.errors import ExportError
from ragkit.pipeline.export import LIST_SEPARATOR, resolve_format
from ragkit.pipeline.index import IndexConfig
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings, load_settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot

N_DOCS = 20
KG = {
    "doc_id": "notes",
    "chunks": [{"id": "c1", "content": "Ragkit uses NetworkX,\nand writes \"GraphML\".", "file_path": "notes.md"}],
    "entities": [{"name": "Ragkit", "type": "software", "description": "A framework."}],
    "relations": [{"source": "Ragkit", "target": "NetworkX", "keywords": "uses", "description": "Ragkit uses NetworkX."}],
}


@pytest.fixture(scope="module")
def passages() -> list[Document]:
    corpus = load_musique()[0]
    return [Document.from_text(p["title"] + "\n" + p["text"]) for p in corpus[:N_DOCS]]


async def build(rag: RAG, passages: list[Document]) -> dict:
    """Index, add a custom KG and a manual entity; returns the store snapshot."""
    await rag.indexer().insert(passages)
    await rag.ainsert_custom_kg(KG)
    await rag.acreate_entity("Export Test", "concept", "Made by hand.")
    return await store_snapshot(rag.stores)


@pytest.fixture
async def rag(tmp_path, passages):
    rag = RAG(
        Settings(working_dir=tmp_path / "data"),
        llm=ReplayLLM(),
        embedder=HashEmbedder({"dimension": 32}),
        index=IndexConfig(llm_concurrency=4),
    )
    async with rag:
        rag.snap = await build(rag, passages)  # type: ignore[attr-defined]
        yield rag


def cited(snap: dict) -> set[str]:
    return {c for p in [*snap["nodes"].values(), *snap["edges"].values()] for c in p["source_ids"]}


async def test_stores_hold_data_only(rag):
    """Indexing, a custom KG and a manual edit write no query bookkeeping (such
    as token counts of the context lines, which depend on the tokenizer) into
    any node, edge, chunk record or vector: how the query side renders and
    counts is its own business (``ragkit/query/counting.py``)."""
    snap = rag.snap
    assert {k for p in snap["nodes"].values() for k in p} == {"name", "type", "description", "source_ids"}
    assert {k for p in snap["edges"].values() for k in p} == {
        "source", "target", "keywords", "description", "weight", "source_ids"}
    records = await rag.stores.chunks.get_many(snap["chunks"])
    # ``location`` is where a chunk came from (character span, pages, section): data, not bookkeeping.
    assert {k for r in records for k in r} == {"doc_id", "content", "order", "tokens", "file_path", "location"}
    vectors = {
        "chunk_vectors": {"doc_id", "order", "file_path"},
        "entity_vectors": {"key", "name"},
        "relation_vectors": {"source", "target"},
    }
    for name, keys in vectors.items():
        found = await getattr(rag.stores, name).get(snap[name])
        assert {k for v in found for k in v.metadata} == keys, name


async def test_json_round_trip(rag, tmp_path):
    snap = rag.snap
    summary = await rag.aexport(tmp_path / "graph.json")
    data = json.loads((tmp_path / "graph.json").read_text(encoding="utf-8"))
    assert summary.format == "json" and data["format"] == "ragkit-graph"
    # Everything stored, as stored: the graph holds data only, nothing for queries to strip.
    assert {n["id"]: n["properties"] for n in data["nodes"]} == snap["nodes"]
    assert {(e["source"], e["target"]): e["properties"] for e in data["edges"]} == snap["edges"]
    chunks = {c["id"]: c for c in data["chunks"]}
    # Every chunk, cited or not: the graph with all its sources, so an export can be read without the store.
    assert set(chunks) == set(snap["chunks"]) >= cited(snap) and summary.chunks == len(chunks)
    assert (summary.entities, summary.relations) == (len(snap["nodes"]), len(snap["edges"]))
    for cid, chunk in chunks.items():
        stored = await rag.stores.chunks.get(cid)
        assert (chunk["content"], chunk["doc_id"], chunk["file_path"]) == (
            stored["content"], stored["doc_id"], stored.get("file_path")
        )
    docs = {c["doc_id"] for c in chunks.values()}
    assert {"notes", "manual"} <= docs and any(d.startswith("doc-") for d in docs)
    assert chunks[snap["nodes"]["ragkit"]["source_ids"][0]]["file_path"] == "notes.md"


async def test_graphml_round_trip(rag, tmp_path):
    snap = rag.snap
    path = tmp_path / "out" / "graph.graphml"
    summary = await rag.aexport(path)
    graph = nx.read_graphml(path)
    assert summary.format == "graphml" and summary.chunks == 0
    assert graph.number_of_nodes() == len(snap["nodes"]) == summary.entities
    assert graph.number_of_edges() == len(snap["edges"]) == summary.relations
    for key, props in snap["nodes"].items():
        node = graph.nodes[key]
        assert node["source_ids"].split(LIST_SEPARATOR) == props["source_ids"]
        assert node["description"] == props["description"] and node["type"] == props["type"]
    (a, b), props = next(iter(snap["edges"].items()))
    assert graph.edges[a, b]["weight"] == props["weight"]
    assert graph.edges[a, b]["source_ids"].split(LIST_SEPARATOR) == props["source_ids"]


async def test_csv_round_trip(rag, tmp_path):
    snap = rag.snap
    folder = tmp_path / "csv"
    summary = await rag.aexport(folder)
    assert summary.format == "csv"

    def rows(name: str) -> list[dict]:
        with (folder / name).open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))

    entities, relations, chunks = rows("entities.csv"), rows("relations.csv"), rows("chunks.csv")
    assert len(entities) == len(snap["nodes"]) and len(relations) == len(snap["edges"])
    assert {r["id"]: r["source_ids"].split(LIST_SEPARATOR) for r in entities} == {
        k: p["source_ids"] for k, p in snap["nodes"].items()
    }
    assert {(r["source_id"], r["target_id"]) for r in relations} == set(snap["edges"])
    assert {r["id"] for r in chunks} == set(snap["chunks"]) >= cited(snap) and len(chunks) == summary.chunks
    custom = next(r for r in chunks if r["doc_id"] == "notes")
    assert custom["content"] == KG["chunks"][0]["content"], "newlines and quotes survive CSV"


def test_format_from_suffix_or_option(tmp_path):
    assert resolve_format(tmp_path / "g.json") == "json"
    assert resolve_format(tmp_path / "g.GraphML") == "graphml"
    assert resolve_format(tmp_path) == "csv" and resolve_format(tmp_path / "folder") == "csv"
    assert resolve_format(tmp_path / "g.txt", "json") == "json"
    with pytest.raises(ExportError, match="--format"):
        resolve_format(tmp_path / "g.txt")
    with pytest.raises(ExportError, match="json, graphml, csv"):
        resolve_format(tmp_path / "g.json", "yaml")


def test_cli_export(tmp_path, passages, monkeypatch, capsys):
    """``ragkit --config ... export`` on a workspace indexed through the API.
    Troubleshoot: the settings file must give the same working dir and embedder
    dimension that indexing used, or the vector stores refuse to open."""
    for name in list(os.environ):
        if name.startswith("RAGKIT_") and name != "RAGKIT_MUSIQUE_DIR":
            monkeypatch.delenv(name)
    config = tmp_path / "ragkit.toml"
    config.write_text(
        f'working_dir = "{tmp_path / "data"}"\n[embedder]\nname = "hash"\n[embedder.options]\ndimension = 32\n',
        encoding="utf-8",
    )
    rag = RAG(load_settings(config).settings, llm=ReplayLLM(), index=IndexConfig(llm_concurrency=4))

    async def index() -> dict:
        async with rag:
            return await build(rag, passages)

    snap = asyncio.run(index())
    out = tmp_path / "export.json"
    assert main(["--config", str(config), "export", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line == (
        f"exported {len(snap['nodes'])} entities, {len(snap['edges'])} relations and "
        f"{len(snap['chunks'])} chunks to {out} (json)"
    )
    assert len(json.loads(out.read_text(encoding="utf-8"))["nodes"]) == len(snap["nodes"])

    assert main(["--config", str(config), "export", str(tmp_path / "csvdir"), "--format", "csv"]) == 0
    assert (tmp_path / "csvdir" / "relations.csv").is_file()
    capsys.readouterr()
    assert main(["--config", str(config), "export", str(tmp_path / "g.txt")]) == 2
    assert "cannot tell the export format" in capsys.readouterr().err


# -- characters XML cannot hold -------------------------------------------------------------

# \x01, \x0b, \x1f (controls), \ufffe, \uffff (non-characters) are not XML 1.0
# characters, not even as &#...; references; \t, \n, \x7f and U+FFFD are.
ODD = {
    "bad\x01name": {"name": "Bad\x01Name", "type": "concept", "description": "vertical\x0btab, end\ufffe",
                    "source_ids": ["c-odd"]},
    "fine": {"name": "Fine", "type": "thing\x1f", "description": "tab\tnewline\nDEL\x7f and \ufffd kept",
             "source_ids": ["c-odd"]},
}
ODD_EDGE = {"keywords": "uses\uffff", "description": "plain", "weight": 2.0, "source_ids": ["c-odd"]}


@pytest.fixture
async def odd_rag(tmp_path):
    async with RAG(Settings(working_dir=tmp_path / "odd"), llm=ReplayLLM()) as rag:
        await rag.stores.graph.upsert_nodes(ODD)
        await rag.stores.graph.upsert_edge("bad\x01name", "fine", ODD_EDGE)
        await rag.stores.chunks.upsert({"c-odd": {"content": "odd\x01text", "doc_id": "d", "order": 0, "tokens": 2}})
        await rag.acreate_entity("Made\x02ByHand", "concept", "through the edit API")
        yield rag


async def test_graphml_is_valid_xml_whatever_the_strings_hold(odd_rag, tmp_path):
    path = tmp_path / "odd.graphml"
    summary = await odd_rag.aexport(path)
    graph = nx.read_graphml(path)  # raised ParseError ("not well-formed") before
    assert summary.escaped_values == 7  # 2 ids, 4 node properties, 1 edge keyword
    assert set(graph.nodes) == {"bad\\x01name", "fine", "made\\x02byhand"}
    bad, fine = graph.nodes["bad\\x01name"], graph.nodes["fine"]
    assert bad["name"] == "Bad\\x01Name" and bad["description"] == "vertical\\x0btab, end\\ufffe"
    assert fine["type"] == "thing\\x1f" and fine["description"] == ODD["fine"]["description"]
    assert graph.edges["bad\\x01name", "fine"]["keywords"] == "uses\\uffff"
    assert graph.edges["bad\\x01name", "fine"]["weight"] == 2.0


async def test_json_and_csv_keep_those_strings_exactly(odd_rag, tmp_path):
    summary = await odd_rag.aexport(tmp_path / "odd.json")
    data = json.loads((tmp_path / "odd.json").read_text(encoding="utf-8"))
    assert summary.escaped_values == 0
    nodes = {n["id"]: n["properties"] for n in data["nodes"]}
    for key, props in ODD.items():
        assert nodes[key] == props
    assert data["edges"][0]["properties"] == ODD_EDGE
    assert [c["content"] for c in data["chunks"] if c["id"] == "c-odd"] == ["odd\x01text"]

    await odd_rag.aexport(tmp_path / "csv")
    with (tmp_path / "csv" / "entities.csv").open(encoding="utf-8", newline="") as fh:
        rows = {r["id"]: r for r in csv.DictReader(fh)}
    for key, props in ODD.items():
        assert {k: rows[key][k] for k in ("name", "type", "description")} == {
            k: props[k] for k in ("name", "type", "description")}
    with (tmp_path / "csv" / "relations.csv").open(encoding="utf-8", newline="") as fh:
        assert next(csv.DictReader(fh))["keywords"] == "uses\uffff"


def test_cli_export_says_how_many_values_it_escaped(odd_rag, tmp_path, monkeypatch, capsys):
    for name in list(os.environ):
        if name.startswith("RAGKIT_"):
            monkeypatch.delenv(name)
    config = tmp_path / "ragkit.toml"
    config.write_text(f'working_dir = "{tmp_path / "odd"}"\n', encoding="utf-8")
    assert main(["--config", str(config), "export", str(tmp_path / "cli.graphml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("7 values held characters XML cannot carry"), out
    nx.read_graphml(tmp_path / "cli.graphml")
