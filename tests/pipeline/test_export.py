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
    assert {k for r in records for k in r} == {"doc_id", "content", "order", "tokens", "file_path"}
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
    assert set(chunks) == cited(snap) and summary.chunks == len(chunks)
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
    assert {r["id"] for r in chunks} == cited(snap) and len(chunks) == summary.chunks
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
        f"{len(cited(snap))} chunks to {out} (json)"
    )
    assert len(json.loads(out.read_text(encoding="utf-8"))["nodes"]) == len(snap["nodes"])

    assert main(["--config", str(config), "export", str(tmp_path / "csvdir"), "--format", "csv"]) == 0
    assert (tmp_path / "csvdir" / "relations.csv").is_file()
    capsys.readouterr()
    assert main(["--config", str(config), "export", str(tmp_path / "g.txt")]) == 2
    assert "cannot tell the export format" in capsys.readouterr().err
