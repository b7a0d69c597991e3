"""How the context shows entities, relations and chunks: one JSON object per
line, ``json.dumps`` of a row, and where such a line may be cut for counting.

A line's per-query numbers (the references of an entity or relation, the
reference number of a chunk) sit at one end of it, so the rest of the line is
the same text in every query and its token count is kept across queries
(``counting.TokenCounts``). The cuts only say where to look for a token
boundary: ``TokenCounts.joined`` counts the two parts apart only where the
tokenizer guarantees one, so a cut never changes a count.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ragkit.query.items import ChunkItem, EntityItem, RelationItem

REFS = "refs"
"""The last member of an entity or relation row: the references of its sources in the context."""
REF = "ref"
"""The first member of a chunk row: its document's reference number."""


def _not_serialisable(value: object) -> None:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json.dumps(row, ensure_ascii=False) builds an encoder per call; a query renders
# hundreds of rows, so the stdlib's own C encoder is made once (same output,
# tests/query/test_query.py), or json's Python one where there is no C one.
_C_ENCODE = json.encoder.c_make_encoder and json.encoder.c_make_encoder(
    None, _not_serialisable, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
_JSON = json.JSONEncoder(ensure_ascii=False)


def render(row: dict[str, Any]) -> str:
    """``json.dumps(row, ensure_ascii=False)``."""
    return "".join(_C_ENCODE(row, 0)) if _C_ENCODE else _JSON.encode(row)


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the context, and the parts it may be cut into for counting."""

    key: Hashable
    """What the line shows (an item and its numbers): equal keys, equal lines."""
    text: str
    parts: tuple[str, ...]


def plain_line(text: str) -> Line:
    return Line(text, text, (text,))


def graph_line(item: EntityItem | RelationItem, refs: list[int]) -> Line:
    text = render(graph_row(item, refs))
    return Line((id(item), tuple(refs)), text, graph_line_parts(text))


def chunk_line(chunk: ChunkItem, reference: int) -> Line:
    text = render(chunk_row(chunk, reference))
    return Line((id(chunk), reference), text, chunk_line_parts(text))


def graph_row(item: EntityItem | RelationItem, refs: list[int]) -> dict[str, Any]:
    return entity_row(item, refs) if isinstance(item, EntityItem) else relation_row(item, refs)


def entity_row(item: EntityItem, refs: list[int]) -> dict[str, Any]:
    p = item.props
    return {"entity": p.get("name", item.key), "type": p.get("type", ""), "description": p.get("description", ""),
            REFS: refs}


def relation_row(item: RelationItem, refs: list[int]) -> dict[str, Any]:
    p = item.props
    return {
        "entity1": p.get("source", item.key[0]),
        "entity2": p.get("target", item.key[1]),
        "keywords": p.get("keywords", ""),
        "description": p.get("description", ""),
        REFS: refs,
    }


def chunk_row(chunk: ChunkItem, reference: int) -> dict[str, Any]:
    return {REF: reference, "content": chunk.content}


def graph_line_parts(line: str) -> tuple[str, str]:
    """An entity or relation line before its ``refs`` member and from it
    (``', "refs": [...]}'`` can only be that member: a quote inside a JSON
    string is escaped)."""
    cut = line.rindex(f', "{REFS}": ') + 1
    return line[:cut], line[cut:]


def chunk_line_parts(line: str) -> tuple[str, str]:
    """A chunk line through its ``ref`` member (an int, then the first ``", "``) and after it."""
    cut = line.index(", ") + 1
    return line[:cut], line[cut:]
