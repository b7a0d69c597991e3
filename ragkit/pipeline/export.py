"""Export the graph and its sources: JSON, GraphML or a folder of CSV files.

The sources are every chunk of the documents (of those a principal may read),
not only the chunks the graph cites: a chunk that gave no entity is still part
of the indexed corpus, and a round trip must not lose it.

- JSON: ``{"format": "ragkit-graph", "version": 1, "nodes": [...], "edges": [...],
  "chunks": [...]}``; nodes and edges as ``ragkit.schema.Node`` / ``Edge`` dumps,
  chunks as ``{id, doc_id, file_path, order, content}``.
- GraphML (networkx ``write_graphml``): the graph only; ``source_ids`` name the
  chunks, whose text is in the JSON and CSV exports. XML 1.0 cannot hold most
  control characters (``\\x01``, ``\\x0b``...), lone surrogates or ``\\ufffe`` /
  ``\\uffff``, not even as character references: each is written as the text
  ``\\xNN`` / ``\\uNNNN``, and ``ExportSummary.escaped_values`` counts the values
  (ids, property names or values) so changed. JSON and CSV hold every string as is.
- CSV: ``entities.csv``, ``relations.csv`` and ``chunks.csv`` in one folder.

GraphML and CSV have no lists, so list properties (``source_ids``) are written as
strings joined by ``LIST_SEPARATOR``. Nodes and edges are streamed from the
graph store and only the set of chunk ids is held in memory, except for
GraphML, which networkx builds whole before writing.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import IO, Any, Literal, get_args

from pydantic import BaseModel

from ragkit.access import Principal
from ragkit.core.scope import Restrictor, ScopedGraph, resolve_scope
from ragkit.core.stores import Stores, in_pages
from ragkit.errors import ExportError
from ragkit.schema import Edge, Node

Format = Literal["json", "graphml", "csv"]
FORMATS: tuple[str, ...] = get_args(Format)
LIST_SEPARATOR = "<SEP>"
"""LightRAG's separator, so GraphML and CSV files move between the two tools."""
SUFFIXES: dict[str, Format] = {".json": "json", ".graphml": "graphml", ".xml": "graphml"}
ENTITY_COLUMNS = ["id", "name", "type", "description", "source_ids"]
RELATION_COLUMNS = ["source_id", "target_id", "source", "target", "keywords", "description", "weight", "source_ids"]
"""``source_id``/``target_id`` are entity ids (``id`` in entities.csv); ``source``
and ``target`` the display names. Properties outside these columns are not written."""
CHUNK_COLUMNS = ["id", "doc_id", "file_path", "order", "content"]
_BATCH = 256


class ExportSummary(BaseModel):
    format: Format
    path: str
    entities: int
    relations: int
    chunks: int
    """Chunk texts written (0 for GraphML, which holds the graph only)."""
    escaped_values: int = 0
    """GraphML: strings whose XML-invalid characters were written as escapes."""


def resolve_format(path: Path, format: str | None = None) -> Format:
    """``format`` if given, else from the suffix; a folder (or no suffix) is CSV."""
    if format is not None:
        if format not in FORMATS:
            raise ExportError(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
        return format  # type: ignore[return-value]
    if path.is_dir() or not path.suffix:
        return "csv"
    if path.suffix.lower() in SUFFIXES:
        return SUFFIXES[path.suffix.lower()]
    raise ExportError(
        f"cannot tell the export format of {path} from its suffix; "
        "use .json or .graphml, a folder for CSV, or --format json|graphml|csv"
    )


async def export_graph(
    stores: Stores, path: str | Path, format: str | None = None, *, principal: Principal | None = None
) -> ExportSummary:
    """With a principal: only what the documents it may read support, as its
    queries see it (``core/scope.py``), and only their chunks."""
    path = Path(path)
    fmt = resolve_format(path, format)
    writer = {"json": _json, "graphml": _graphml, "csv": _csv}[fmt]
    scope = await resolve_scope(stores, None, None, principal)
    reads = _Reads(stores, scope, ScopedGraph(stores.graph, Restrictor(stores, scope)) if scope else None)
    entities, relations, chunks, *escaped = await writer(reads, path)  # only GraphML escapes
    return ExportSummary(
        format=fmt, path=str(path), entities=entities, relations=relations, chunks=chunks,
        escaped_values=sum(escaped),
    )


# -- JSON ---------------------------------------------------------------------------


async def _json(stores: _Reads, path: Path) -> tuple[int, int, int]:
    cited: set[str] = set()
    with _open(path) as fh:
        fh.write('{"format": "ragkit-graph", "version": 1,\n"nodes": ')
        nodes = await _json_array(fh, (n.model_dump() async for n in _nodes(stores, cited)))
        fh.write(',\n"edges": ')
        edges = await _json_array(fh, (e.model_dump() async for e in _edges(stores, cited)))
        fh.write(',\n"chunks": ')
        chunks = await _json_array(fh, _chunks(stores, await _every_chunk(stores, cited)))
        fh.write("}\n")
    return nodes, edges, chunks


async def _json_array(fh: IO[str], items: AsyncIterator[dict]) -> int:
    n = 0
    fh.write("[")
    async for item in items:
        fh.write(("," if n else "") + "\n" + json.dumps(item, ensure_ascii=False))
        n += 1
    fh.write("\n]")
    return n


# -- GraphML --------------------------------------------------------------------------


async def _graphml(stores: _Reads, path: Path) -> tuple[int, int, int, int]:
    import networkx as nx  # only this format needs it

    xml = _XmlText()
    graph = nx.Graph()
    async for node in _nodes(stores, set()):
        graph.add_node(xml(node.id), **xml.props(_flat(node.properties)))
    async for edge in _edges(stores, set()):
        ends = (xml(edge.source, count=False), xml(edge.target, count=False))  # node ids, counted above
        graph.add_edge(*ends, **xml.props(_flat(edge.properties)))
    path.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(graph, path)
    return graph.number_of_nodes(), graph.number_of_edges(), 0, xml.escaped


# Characters XML 1.0 allows (its "Char" production); no escape can carry the rest.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class _XmlText:
    """Writes XML-invalid characters as ``\\xNN`` / ``\\uNNNN`` text, counting the strings changed."""

    def __init__(self) -> None:
        self.escaped = 0

    def __call__(self, value: Any, count: bool = True) -> Any:
        if not isinstance(value, str):
            return value
        fixed, n = _XML_INVALID.subn(lambda m: m.group().encode("unicode_escape").decode("ascii"), value)
        if count and n:
            self.escaped += 1
        return fixed

    def props(self, properties: dict[str, Any]) -> dict[str, Any]:
        return {self(k): self(v) for k, v in properties.items()}


# -- CSV ----------------------------------------------------------------------------------


async def _csv(stores: _Reads, folder: Path) -> tuple[int, int, int]:
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder} is a file; CSV export writes a folder (or use --format json|graphml)")
    folder.mkdir(parents=True, exist_ok=True)
    cited: set[str] = set()

    async def entity_rows() -> AsyncIterator[dict]:
        async for n in _nodes(stores, cited):
            yield {"id": n.id, **_flat(n.properties)}

    async def relation_rows() -> AsyncIterator[dict]:
        async for e in _edges(stores, cited):
            yield {"source_id": e.source, "target_id": e.target, **_flat(e.properties)}

    entities = await _csv_file(folder / "entities.csv", ENTITY_COLUMNS, entity_rows())
    relations = await _csv_file(folder / "relations.csv", RELATION_COLUMNS, relation_rows())
    chunks = await _csv_file(folder / "chunks.csv", CHUNK_COLUMNS, _chunks(stores, await _every_chunk(stores, cited)))
    return entities, relations, chunks


async def _csv_file(path: Path, columns: list[str], rows: AsyncIterator[dict]) -> int:
    n = 0
    with _open(path) as fh:
        writer = csv.DictWriter(fh, columns, extrasaction="ignore")
        writer.writeheader()
        async for row in rows:
            writer.writerow(row)
            n += 1
    return n


# -- shared ---------------------------------------------------------------------------------


def _open(path: Path) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8", newline="")


class _Reads:
    """The stores as the export reads them: all of them, or a scope's view."""

    def __init__(self, stores: Stores, scope: Any = None, view: Any = None) -> None:
        self.stores = stores
        self.scope = scope
        self.view = view


async def _nodes(reads: _Reads, cited: set[str]) -> AsyncIterator[Node]:
    """Every node, adding its source chunks to ``cited`` on the way."""
    async for batch in in_pages(reads.stores.graph.nodes(), _BATCH):
        if reads.view is not None:
            scoped = await reads.view.restrict_nodes([(n.id, n.properties) for n in batch])
            batch = [Node(id=n.id, properties=p) for n, p in zip(batch, scoped) if p is not None]
        for node in batch:
            cited.update(map(str, node.properties.get("source_ids", [])))  # type: ignore[arg-type]
            yield node


async def _edges(reads: _Reads, cited: set[str]) -> AsyncIterator[Edge]:
    async for batch in in_pages(reads.stores.graph.edges(), _BATCH):
        if reads.view is not None:
            scoped = await reads.view.restrict_edges([(e.key, e.properties) for e in batch])
            batch = [Edge(source=e.source, target=e.target, properties=p) for e, p in zip(batch, scoped) if p is not None]
        for edge in batch:
            cited.update(map(str, edge.properties.get("source_ids", [])))  # type: ignore[arg-type]
            yield edge


def _flat(properties: dict[str, Any]) -> dict[str, Any]:
    return {k: LIST_SEPARATOR.join(map(str, v)) if isinstance(v, list) else v for k, v in properties.items()}


async def _every_chunk(reads: _Reads, cited: set[str]) -> set[str]:
    """The stored chunks and the cited ones (``_chunks`` keeps a scope's own)."""
    return cited | {key async for key in reads.stores.chunks.keys()}


async def _chunks(reads: _Reads, ids: Iterable[str]) -> AsyncIterator[dict]:
    """Chunks in id order; a cited chunk that is missing is skipped (``ragkit
    check`` reports it). A scope's chunks are attributed to its documents, and
    those of documents outside it are left out."""
    ordered = sorted(ids)
    for i in range(0, len(ordered), _BATCH):
        batch = ordered[i : i + _BATCH]
        for cid, rec in zip(batch, await reads.stores.chunks.get_many(batch)):
            if rec is None:
                continue
            row = {"id": cid, **{k: rec.get(k) for k in CHUNK_COLUMNS[1:]}}
            if reads.scope is not None:
                owner = reads.scope.owner(cid)
                if owner is None:
                    continue
                if row["doc_id"] not in reads.scope.doc_ids:
                    row["doc_id"], row["file_path"] = owner
            yield row
