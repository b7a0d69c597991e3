"""How the context shows entities, relations and chunks, one JSON line each, and
the token counts of those lines stored at indexing time so that queries do not
encode the same text again (most of a context's tokens are its chunks)."""

from __future__ import annotations

import json
import zlib

from ragkit.protocols import Tokenizer
from ragkit.query.items import ChunkItem, EntityItem, RelationItem


def item_line(item, refs: list[int]) -> str:
    return entity_line(item, refs) if isinstance(item, EntityItem) else relation_line(item, refs)


def entity_line(item: EntityItem, refs: list[int]) -> str:
    p = item.props
    row = {"entity": p.get("name", item.key), "type": p.get("type", ""), "description": p.get("description", "")}
    if refs:
        row["refs"] = refs
    return json.dumps(row, ensure_ascii=False)


def relation_line(item: RelationItem, refs: list[int]) -> str:
    p = item.props
    row = {
        "entity1": p.get("source", item.key[0]),
        "entity2": p.get("target", item.key[1]),
        "keywords": p.get("keywords", ""),
        "description": p.get("description", ""),
    }
    if refs:
        row["refs"] = refs
    return json.dumps(row, ensure_ascii=False)


LINE_TOKENS = "line_tokens"
"""The property (of nodes, edges and chunk records) holding a stored :func:`line_count`."""


def public_properties(props: dict) -> dict:
    """Properties without the stored line counts: bookkeeping, not data to show or export."""
    return {k: v for k, v in props.items() if k != LINE_TOKENS}


def line_count(tokenizer: Tokenizer, line: str) -> str:
    """A context line's token count, to store with what it renders (a chunk
    record, a node's or edge's properties) when indexing, so that queries do not
    encode the same text again: ``"<tokenizer>|<crc32 of the line>|<tokens>"``.
    A query trusts it only for the same tokenizer and the very same line, so an
    edited description or a changed line format is simply counted afresh."""
    return f"{tokenizer_name(tokenizer)}|{_crc(line)}|{tokenizer.count(line)}"


def stored_count(stored: object, tokenizer_name: str, line: str) -> int | None:
    if not isinstance(stored, str):
        return None
    parts = stored.rsplit("|", 2)
    if len(parts) != 3 or parts[0] != tokenizer_name or parts[1] != _crc(line) or not parts[2].isdigit():
        return None
    return int(parts[2])


def chunk_line_count(tokenizer: Tokenizer, content: str) -> str:
    return line_count(tokenizer, chunk_text(content, 0))


def entity_line_count(tokenizer: Tokenizer, key: str, props: dict) -> str:
    return line_count(tokenizer, entity_line(EntityItem(props, "", key=key), []))


def relation_line_count(tokenizer: Tokenizer, key: tuple[str, str], props: dict) -> str:
    return line_count(tokenizer, relation_line(RelationItem(props, "", key=key), []))


def tokenizer_name(tokenizer: Tokenizer) -> str:
    return str(getattr(tokenizer, "name", type(tokenizer).__name__))


def _crc(line: str) -> str:
    return f"{zlib.crc32(line.encode('utf-8', 'surrogatepass')):08x}"


def with_refs(plain: str, refs: list[int]) -> str:
    """``item_line(item, refs)`` from ``item_line(item, [])``: the refs are the row's last key."""
    return f"{plain[:-1]}, \"refs\": {json.dumps(refs)}}}" if refs else plain


_REF0 = '{"ref": 0, '


def with_reference(plain: str, reference: int) -> str:
    """``chunk_line(chunk, reference)`` from ``chunk_line(chunk, 0)``."""
    return f'{{"ref": {reference}, {plain[len(_REF0):]}'


def chunk_line(chunk: ChunkItem, reference: int) -> str:
    return chunk_text(chunk.content, reference)


def chunk_text(content: str, reference: int) -> str:
    return json.dumps({"ref": reference, "content": content}, ensure_ascii=False)
