"""Context stage: found items in, a context string that fits its budgets out.

Budgets: entities and relations each have their own; chunks get what remains of
the total after the system prompt, the graph sections, the question and the
history. Each rendered line is encoded once; a section's or the whole context's
count is the sum of its lines' plus what each line break adds between its two
neighbouring characters. That is an upper bound of the joined text's count,
within about one token per entity or relation line (pieces only merge across a
break), and it spares encoding the whole context again, which costs as much as
building it.

Claims stay with their evidence. Supporting chunks are chosen in two passes:
first, for each kept entity and relation in rank order, its best-ranked source
chunk if none is chosen yet (so evidence is not crowded out by chunks that merely
rank well); then any other chunks in rank order while they fit. An entity or
relation none of whose source chunks made it is dropped, never shown as a
conclusion without its evidence; the freed tokens go to more chunks.

Each chunk carries the reference number of its document; chunks of one document
share it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from ragkit.protocols import Tokenizer
from ragkit.query.items import ChunkItem, EntityItem, RelationItem
from ragkit.query.lines import (
    LINE_TOKENS,
    chunk_line,
    item_line,
    stored_count,
    tokenizer_name,
    with_reference,
    with_refs,
)

ENTITY_HEADER = "-----Entities (knowledge graph)-----"
RELATION_HEADER = "-----Relations (knowledge graph)-----"
CHUNK_HEADER = "-----Source chunks-----"
REFERENCE_HEADER = "-----References-----"
MAX_REFS = 5
"""References listed per entity or relation (its first supporting documents)."""
REF_RESERVE = 20
"""Tokens kept per entity or relation line for its ``refs`` list."""


@dataclass
class Budget:
    entity_tokens: int
    relation_tokens: int
    total_tokens: int
    fixed_tokens: int
    """System prompt without context, question and history."""


@dataclass
class Context:
    text: str
    entities: list[EntityItem]
    relations: list[RelationItem]
    chunks: list[ChunkItem]
    tokens: dict[str, int]
    references: list[tuple[int, str, str | None, list[str]]]
    """(number, doc id, file path, chunk ids)"""
    dropped_unsupported: int = 0
    truncated: dict[str, int] = field(default_factory=dict)


def rank_graph_chunks(entities: list[EntityItem], relations: list[RelationItem]) -> list[tuple[str, int]]:
    """(chunk id, support) cited by the items, most shared first, then earliest cited."""
    support: Counter[str] = Counter()
    first: dict[str, int] = {}
    for rank, item in enumerate(_interleave(entities, relations)):
        for cid in item.sources:
            support[cid] += 1
            first.setdefault(cid, rank)
    return sorted(support.items(), key=lambda kv: (-kv[1], first[kv[0]], kv[0]))


def build_context(
    entities: list[EntityItem],
    relations: list[RelationItem],
    chunks: list[ChunkItem],
    tokenizer: Tokenizer,
    budget: Budget,
) -> Context:
    """``chunks`` are the candidates in rank order (graph sources and vector hits merged)."""
    builder = _Builder(tokenizer, budget)
    ents = builder.prefix(entities, ENTITY_HEADER, budget.entity_tokens)
    rels = builder.prefix(relations, RELATION_HEADER, budget.relation_tokens)
    while True:
        chosen = builder.choose(ents, rels, chunks)
        kept_e = [e for e in ents if set(e.sources) & chosen]
        kept_r = [r for r in rels if set(r.sources) & chosen]
        context = builder.render(kept_e, kept_r, [c for c in chunks if c.id in chosen])
        # Token counts do not add up exactly across lines: correct and retry.
        if context.tokens.get("entities", 0) > budget.entity_tokens:
            ents = ents[:-1]
        elif context.tokens.get("relations", 0) > budget.relation_tokens:
            rels = rels[:-1]
        elif (over := context.tokens["context"] + budget.fixed_tokens - budget.total_tokens) > 0 and chosen:
            builder.give_back += over
        else:
            break
    context.dropped_unsupported = len(ents) - len(kept_e) + len(rels) - len(kept_r)
    context.truncated = {"entities": len(entities) - len(ents), "relations": len(relations) - len(rels)}
    return context


class _Builder:
    def __init__(self, tokenizer: Tokenizer, budget: Budget) -> None:
        self.tok = tokenizer
        self.budget = budget
        self.give_back = 0
        self._counts: dict[str, int] = {}
        self._plain: dict[int, int] = {}
        self._lines: dict[int, str] = {}
        self.tokenizer_name = tokenizer_name(tokenizer)

    def count(self, line: str) -> int:
        """Token count of one rendered line, each line encoded once: choosing and
        retrying re-measure the same lines (the query's hot path)."""
        if line not in self._counts:
            self._counts[line] = self.tok.count(line)
        return self._counts[line]

    def plain_tokens(self, item: EntityItem | RelationItem | ChunkItem) -> int:
        """Tokens of an item's line without refs (a chunk's with reference 0),
        rendered and encoded once per build: every pass needs them."""
        key = id(item)
        if key not in self._plain:
            line = self.plain_line(item)
            stored = item.line_tokens if isinstance(item, ChunkItem) else item.props.get(LINE_TOKENS)
            count = stored_count(stored, self.tokenizer_name, line)
            self._plain[key] = self.tok.count(line) if count is None else count
        return self._plain[key]

    def plain_line(self, item: EntityItem | RelationItem | ChunkItem) -> str:
        """An item's line without refs (a chunk's with reference 0), rendered once
        per build; the shown line only adds its refs or reference number to it."""
        key = id(item)  # items outlive the build; ids stay unique meanwhile
        if key not in self._lines:
            self._lines[key] = chunk_line(item, 0) if isinstance(item, ChunkItem) else item_line(item, [])
        return self._lines[key]

    def prefix(self, items: list, header: str, limit: int) -> list:
        kept, used = [], self.count(header) + 1
        for item in items:
            cost = self.plain_tokens(item) + REF_RESERVE
            if used + cost > limit:
                break
            kept.append(item)
            used += cost
        return kept

    def choose(self, ents: list[EntityItem], rels: list[RelationItem], chunks: list[ChunkItem]) -> set[str]:
        graph_tokens = self._section_tokens(ents, ENTITY_HEADER) + self._section_tokens(rels, RELATION_HEADER)
        left = self.budget.total_tokens - self.budget.fixed_tokens - graph_tokens - self._overhead() - self.give_back
        costs = {c.id: self.plain_tokens(c) + 8 for c in chunks}  # + its reference line
        items = [(item, set(item.sources)) for item in _interleave(ents, rels)]
        chosen: set[str] = set()
        for _, sources in items:  # evidence first
            if chosen & sources:
                continue
            for cid in (c.id for c in chunks if c.id in sources):
                if costs[cid] <= left:
                    chosen.add(cid)
                    left -= costs[cid]
                    break
        left += sum(self.plain_tokens(i) + REF_RESERVE for i, sources in items if not chosen & sources)
        for chunk in chunks:  # then by rank
            if chunk.id not in chosen and costs[chunk.id] <= left:
                chosen.add(chunk.id)
                left -= costs[chunk.id]
        return chosen

    def render(self, ents: list[EntityItem], rels: list[RelationItem], chunks: list[ChunkItem]) -> Context:
        refs: dict[str, int] = {}
        for chunk in chunks:
            chunk.reference = refs.setdefault(chunk.doc_id, len(refs) + 1)
        ref_of = {c.id: c.reference for c in chunks}

        def cited(item) -> list[int]:
            return sorted({ref_of[c] for c in item.sources if c in ref_of})[:MAX_REFS]

        cited_by: dict[str, list[str]] = {}
        for item in _interleave(ents, rels):
            for cid in item.sources:
                cited_by.setdefault(cid, []).append(_name(item))
        for chunk in chunks:
            chunk.supports = cited_by.get(chunk.id, [])
            chunk.support = len(chunk.supports)
        sections = {
            "entities": [ENTITY_HEADER, *(with_refs(self.plain_line(e), cited(e)) for e in ents)] if ents else [],
            "relations": [RELATION_HEADER, *(with_refs(self.plain_line(r), cited(r)) for r in rels)]
            if rels else [],
            "chunks": [CHUNK_HEADER, *(with_reference(self.plain_line(c), c.reference) for c in chunks)]
            if chunks else [],
        }
        references = []
        for doc_id, number in refs.items():
            members = [c for c in chunks if c.doc_id == doc_id]
            references.append((number, doc_id, members[0].file_path, [c.id for c in members]))
        if references:
            sections["references"] = [REFERENCE_HEADER, *(f"[{n}] {path or doc}" for n, doc, path, _ in references)]
        text = "\n\n".join("\n".join(lines) for lines in sections.values() if lines)
        counts = {
            "entities": [self.count(ENTITY_HEADER), *(self.item_tokens(e, cited(e)) for e in ents)] if ents else [],
            "relations": [self.count(RELATION_HEADER), *(self.item_tokens(r, cited(r)) for r in rels)] if rels else [],
            "chunks": [self.count(CHUNK_HEADER), *(self.chunk_tokens(c) for c in chunks)] if chunks else [],
        }
        if references:
            counts["references"] = [self.count(line) for line in sections["references"]]
        tokens = {name: self.joined(sections[name], c, "\n") for name, c in counts.items()}
        parts = [name for name in counts if sections[name]]
        tokens["context"] = self.joined([sections[n][-1] for n in parts], [tokens[n] for n in parts], "\n\n",
                                        firsts=[sections[n][0] for n in parts])
        return Context(text, ents, rels, chunks, tokens, references)

    def joined(self, lines: list[str], counts: list[int], sep: str, firsts: list[str] | None = None) -> int:
        """Tokens of ``lines`` (given their counts) joined by ``sep``: what the
        separator adds between the two characters it stands between (a line
        break after ``}`` merges into one token with it)."""
        firsts = firsts or lines
        seps = sum(self.separator(a[-1:], sep, b[:1]) for a, b in zip(lines, firsts[1:]))
        return sum(counts) + seps

    def separator(self, before: str, sep: str, after: str) -> int:
        key = f"{before}{sep}{after}"
        if key not in self._counts:
            self._counts[key] = max(0, self.tok.count(key) - self.tok.count(before) - self.tok.count(after))
        return self._counts[key]

    def item_tokens(self, item, refs: list[int]) -> int:
        """An entity or relation line with its refs, as the line without them
        (already counted when choosing) plus the refs alone."""
        if not refs:
            return self.plain_tokens(item)
        return self.plain_tokens(item) + self.count(_refs_text(refs)) - self.count('"}')

    def chunk_tokens(self, chunk: ChunkItem) -> int:
        """A chunk line, as counted when choosing with reference 0: a reference
        number below 1000 is one token whatever its digits."""
        return self.plain_tokens(chunk) - 1 + self.count(str(chunk.reference))

    def _section_tokens(self, items: list, header: str) -> int:
        if not items:
            return 0
        return self.count(header) + sum(self.plain_tokens(i) + REF_RESERVE for i in items)

    def _overhead(self) -> int:
        return sum(self.count(h) + 2 for h in (CHUNK_HEADER, REFERENCE_HEADER)) + 4


def _refs_text(refs: list[int]) -> str:
    """How adding refs changes a line's end: ``"}`` becomes ``", "refs": [..]}``."""
    return '", ' + json.dumps({"refs": refs})[1:]


def _interleave(entities: list[EntityItem], relations: list[RelationItem]) -> list:
    out = []
    for i in range(max(len(entities), len(relations))):
        out += [x[i] for x in (entities, relations) if i < len(x)]
    return out


def _name(item) -> str:
    return item.key if isinstance(item, EntityItem) else " - ".join(item.key)
