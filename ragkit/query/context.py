"""Context stage: found items in, a context that fits its budgets out.

The context is up to four sections (entities, relations, source chunks,
references) separated by a blank line: a header, then the rows. Entities,
relations and chunks are JSON lines (``json.dumps`` of each row, ``lines.py``)
in a ``json`` code block; references are ``[n] path`` lines.

Budgets: the chunks come first. The candidates arrive fused by rank and cut
to ``chunk_top_k`` (one bound for every source of chunks, ``engine.py``); they
are taken in rank order while they fit the total, after the prompt without the
context (system prompt, question, history). The entities and relations those
chunks support then share what is left, each within its own budget, in
proportion to the two budgets (what one leaves goes to the other). So a small
total never starves the chunks (the evidence, and what recall measures), and a
large one is filled with graph rows up to their own budgets. Every reported
count is exact, by the configured tokenizer: the context's, each section's and
the whole prompt's.
Where the tokenizer guarantees a token boundary at the start of a line
(``ragkit.core.tokens.splits_between``), a text's count is the sum of its
lines' counts, each line's from its parts (the part of a row that shows no
per-query number is the same text query after query), and every part's count
is kept per tokenizer (``counting.TokenCounts``): a query encodes only text no
earlier query showed. Otherwise the texts are counted whole. Choosing works on
estimates (a line's count before its references are known, plus a reserve for
them); the rendered context is then counted, and while a section or the prompt
is over its budget the graph sections' last rows go first, then chunks; room
the reserves left unused is given, once, to more rows. The code block's closing
line keeps every row followed by a line break, so a chunk's text is counted
once, not once more as the last row of its section.

Claims stay with their evidence: only entities and relations with a source
chunk in the context are shown, never a conclusion without its evidence.

Each chunk carries the reference number of its document; chunks of one document
share it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field, replace

from ragkit.protocols import Tokenizer
from ragkit.query.counting import TokenCounts
from ragkit.query.items import ChunkItem, EntityItem, RelationItem
from ragkit.query.lines import Line, chunk_line, graph_line, plain_line

ENTITY_HEADER = "-----Entities (knowledge graph)-----"
RELATION_HEADER = "-----Relations (knowledge graph)-----"
CHUNK_HEADER = "-----Source chunks-----"
REFERENCE_HEADER = "-----References-----"
SECTION_SEPARATOR = "\n\n"
FENCE_OPEN, FENCE_CLOSE = "```json", "```"
MAX_REFS = 5
"""References listed per entity or relation (its first supporting documents)."""
MIN_CUT_TOKENS = 64
"""A row is shown cut (``_BudgetedContextBuilder._cut``) only if this much of its description fits."""
CUT_MARK = " …"
RESERVED_REFERENCE = 99
"""The reference number estimates reserve room for, in each of an entity's or
relation's ``MAX_REFS`` references and in a chunk's ``ref``."""


@dataclass
class Budget:
    entity_tokens: int
    relation_tokens: int
    total_tokens: int
    fixed_tokens: int
    """The prompt without the context: system prompt, question and history."""
    prompt_prefix: str = ""
    """The prompt's text right before the context: where the context's first
    token could merge with the prompt's, the two are counted together."""


@dataclass
class Context:
    text: str
    entities: list[EntityItem]
    relations: list[RelationItem]
    chunks: list[ChunkItem]
    tokens: dict[str, int]
    """Exact counts of each section's text and of the whole (``context``)."""
    references: list[tuple[int, str, str | None, list[str]]]
    """(number, doc id, file path, chunk ids)"""
    prompt_tokens: int = 0
    """The whole prompt with this context in it: ``fixed_tokens`` plus what the context adds."""
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
    counts: TokenCounts | None = None,
) -> Context:
    """``chunks`` are the candidates in rank order (every source fused, cut to
    the chunk bound). ``counts``: the tokenizer's kept counts (``TokenCounts.of``)."""
    builder = _BudgetedContextBuilder(counts or TokenCounts.of(tokenizer), budget)
    context = _fit(builder, entities, relations, chunks)
    # Estimates reserve room for references that mostly goes unused: once, give it to more rows.
    left = budget.total_tokens - context.prompt_tokens
    if left > 0:
        builder.give_back -= left
        more = _fit(builder, entities, relations, chunks)
        if builder.fits(more) and _rows(more) > _rows(context):
            context = more
        else:  # the first fit again (its lines are kept: no new rendering), references renumbered
            context = builder.render(context.entities, context.relations, context.chunks)
    _show_support(context)
    shown = {c.id for c in context.chunks}
    supported = sum(1 for item in (*entities, *relations) if not shown.isdisjoint(item.sources))
    context.dropped_unsupported = len(entities) + len(relations) - supported
    context.truncated = {"entities": sum(1 for e in entities if not shown.isdisjoint(e.sources)) - len(context.entities),
                         "relations": sum(1 for r in relations if not shown.isdisjoint(r.sources))
                         - len(context.relations)}
    return context


def _rows(context: Context) -> int:
    return len(context.entities) + len(context.relations) + len(context.chunks)


def _fit(
    builder: _BudgetedContextBuilder, entities: list[EntityItem], relations: list[RelationItem], chunks: list[ChunkItem]
) -> Context:
    """Choose and render until every budget holds: estimates are not counts.
    Over the total, the graph sections give way first (their last rows), then chunks."""
    budget = builder.budget
    chosen, ents, rels = builder.choose(entities, relations, chunks)
    while True:
        context = builder.render(ents, rels, chosen)
        over = context.prompt_tokens - budget.total_tokens
        if context.tokens["entities"] > budget.entity_tokens:
            ents = ents[:-1]
        elif context.tokens["relations"] > budget.relation_tokens:
            rels = rels[:-1]
        elif over > 0 and (ents or rels):
            if len(rels) * budget.entity_tokens >= len(ents) * budget.relation_tokens and rels:
                rels = rels[:-1]
            else:
                ents = ents[:-1]
        elif over > 0 and chosen:
            builder.give_back += over
            chosen, ents, rels = builder.choose(entities, relations, chunks)
        else:
            return context


class _BudgetedContextBuilder:
    def __init__(self, counts: TokenCounts, budget: Budget) -> None:
        self.counts = counts
        self.budget = budget
        self.give_back = 0
        self._estimates: dict[int, int] = {}
        self._lines: dict[Hashable, Line] = {}
        self._units: dict[tuple[Hashable, str], int] = {}
        self._reserves: dict[int, int] = {}
        self._copies: list = []
        self._cuts: dict[tuple[int, float], EntityItem | RelationItem | None] = {}
        self._ref_reserve = counts.count(chunk_line(ChunkItem("", "", "", None, ""), RESERVED_REFERENCE).parts[0])

    # -- estimates, for choosing ----------------------------------------------------

    def estimate(self, item: EntityItem | RelationItem | ChunkItem) -> int:
        """Tokens of an item's line and its line break, before its references
        are known: the part of the line that does not depend on them, counted,
        plus a reserve for them (a chunk: also for its reference line)."""
        key = id(item)  # items outlive the build; ids stay unique meanwhile
        found = self._estimates.get(key)  # the hot path: choosing asks again and again
        if found is None:
            if isinstance(item, ChunkItem):  # the rendered line's part after its ref, and its line break
                rest = chunk_line(item, 0).parts[1] + "\n"
                reference = _reference_line(RESERVED_REFERENCE, item.doc_id, item.file_path) + "\n"
                found = self.counts.count(rest) + self._ref_reserve + self.counts.count(reference)
            else:  # the rendered line's part before its refs, and the most refs it can show
                head = graph_line(item, []).parts[0]
                found = self.counts.count(head) + self._refs_reserve(len(set(item.sources)))
            self._estimates[key] = found
        return found

    def _refs_reserve(self, sources: int) -> int:
        """Tokens of the ``refs`` member of a line with this many sources, and its line break."""
        refs = min(MAX_REFS, sources)
        if refs not in self._reserves:
            tail = graph_line(EntityItem({}, ""), [RESERVED_REFERENCE] * refs).parts[1]
            self._reserves[refs] = self.counts.count(tail + "\n")
        return self._reserves[refs]

    def fits(self, context: Context) -> bool:
        return (context.tokens["entities"] <= self.budget.entity_tokens
                and context.tokens["relations"] <= self.budget.relation_tokens
                and context.prompt_tokens <= self.budget.total_tokens)

    def prefix(self, items: list, header: str, limit: float) -> tuple[list, int]:
        """Items in rank order while their section fits ``limit``, and the
        section's estimate (0 if empty). A row too long for what is left is
        passed over, not the end of the section, and the first one passed
        over is shown cut to what is left at the end (``_cut``): one long
        merged description (a hub's) must not leave the budget unused."""
        kept, used, passed = [], self._fixed(header, fenced=True), None
        for item in items:
            cost = self.estimate(item)
            if used + cost <= limit:
                kept.append(item)
                used += cost
            elif passed is None:
                passed = item
        cut = None
        if passed is not None:  # choosing runs several times per query: one bisection per row and room
            key = (id(passed), limit - used)
            if key not in self._cuts:
                self._cuts[key] = self._cut(passed, limit - used)
            cut = self._cuts[key]
        if cut is not None:
            rank = {id(item): i for i, item in enumerate(items)}
            rank[id(cut)] = rank[id(passed)]
            kept = sorted([*kept, cut], key=lambda item: rank[id(item)])
            used += self.estimate(cut)
        return kept, used if kept else 0

    def _cut(self, item: EntityItem | RelationItem, room: float) -> EntityItem | RelationItem | None:
        """A copy of a graph row with its description cut (at a word, marked
        ``…``) so the row fits ``room``; ``None`` if less than ``MIN_CUT_TOKENS``
        of description would show."""
        text = str(item.props.get("description", ""))

        def shortened(chars: int) -> EntityItem | RelationItem:
            shown = text[:chars].rsplit(" ", 1)[0] if chars < len(text) else text
            copy = replace(item, props={**item.props, "description": shown + CUT_MARK})
            self._copies.append(copy)  # kept alive: the caches here are keyed by id()
            return copy

        if room - self.estimate(shortened(0)) < MIN_CUT_TOKENS:
            return None
        low, high = 0, len(text)  # the longest prefix that fits, by bisection on characters
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self.estimate(shortened(middle)) <= room else (low, middle)
        best = shortened(low)
        return best if self.estimate(best) <= room and len(best.props["description"]) > len(CUT_MARK) else None

    def choose(self, entities: list[EntityItem], relations: list[RelationItem], chunks: list[ChunkItem]
               ) -> tuple[list[ChunkItem], list[EntityItem], list[RelationItem]]:
        """Chunks first, in rank order while they fit the total; then the
        entities and relations those chunks support, each section within its
        own budget and together within what the chunks left. The graph
        sections share that room in proportion to their budgets, and what one
        does not use goes to the other."""
        budget = self.budget
        fixed = self._fixed(CHUNK_HEADER, fenced=True) + self._fixed(REFERENCE_HEADER, fenced=False)
        room = budget.total_tokens - budget.fixed_tokens - fixed - self.give_back
        chosen: list[ChunkItem] = []
        for chunk in chunks:
            cost = self.estimate(chunk)
            if cost <= room:
                chosen.append(chunk)
                room -= cost
        ids = {c.id for c in chosen}
        ents = [e for e in entities if not ids.isdisjoint(e.sources)]
        rels = [r for r in relations if not ids.isdisjoint(r.sources)]
        both = budget.entity_tokens + budget.relation_tokens
        share = budget.entity_tokens / both if both else 0.5
        kept_e, used_e = self.prefix(ents, ENTITY_HEADER, min(budget.entity_tokens, room * share))
        kept_r, used_r = self.prefix(rels, RELATION_HEADER, min(budget.relation_tokens, room - used_e))
        if len(kept_e) < len(ents):  # what relations left to entities
            kept_e, used_e = self.prefix(ents, ENTITY_HEADER, min(budget.entity_tokens, room - used_r))
        return chosen, kept_e, kept_r

    def _section_tokens(self, items: list, header: str) -> int:
        return self._fixed(header, fenced=True) + sum(self.estimate(i) for i in items) if items else 0

    def _fixed(self, header: str, fenced: bool) -> int:
        """A section's lines but its rows, and the blank line after it."""
        lines = [header, FENCE_OPEN, FENCE_CLOSE] if fenced else [header]
        return sum(self.counts.count(line + "\n") for line in lines) + self.counts.count(SECTION_SEPARATOR)

    # -- the context, counted ---------------------------------------------------------

    def render(self, ents: list[EntityItem], rels: list[RelationItem], chunks: list[ChunkItem]) -> Context:
        refs: dict[str, int] = {}
        for chunk in chunks:
            chunk.reference = refs.setdefault(chunk.doc_id, len(refs) + 1)
        ref_of = {c.id: c.reference for c in chunks}

        def cited(item) -> list[int]:
            return sorted({ref_of[c] for c in item.sources if c in ref_of})[:MAX_REFS]

        members: dict[str, list[ChunkItem]] = {}
        for chunk in chunks:
            members.setdefault(chunk.doc_id, []).append(chunk)
        references = [(refs[doc], doc, group[0].file_path, [c.id for c in group]) for doc, group in members.items()]
        rows = {
            "entities": (ENTITY_HEADER, [self._line(graph_line, e, cited(e)) for e in ents]),
            "relations": (RELATION_HEADER, [self._line(graph_line, r, cited(r)) for r in rels]),
            "chunks": (CHUNK_HEADER, [self._line(chunk_line, c, c.reference) for c in chunks]),
        }
        sections = {name: _fenced(header, lines) for name, (header, lines) in rows.items() if lines}
        if references:
            sections["references"] = [plain_line(REFERENCE_HEADER),
                                      *(plain_line(_reference_line(n, d, p)) for n, d, p, _ in references)]
        text = SECTION_SEPARATOR.join("\n".join(line.text for line in lines) for lines in sections.values())
        tokens = {**dict.fromkeys([*rows, "references"], 0), **self._count(sections)}
        context = Context(text, ents, rels, chunks, tokens, references)
        context.prompt_tokens = self.budget.fixed_tokens + self._added(text, tokens["context"])
        return context

    def _line(self, make, item, numbers) -> Line:
        """A rendered line, kept for the build: choosing again mostly shows the same ones."""
        key = (id(item), tuple(numbers) if isinstance(numbers, list) else numbers)
        if key not in self._lines:
            self._lines[key] = make(item, numbers)
        return self._lines[key]

    def _count(self, sections: dict[str, list[Line]]) -> dict[str, int]:
        """Exact counts of each section's text and of their joined text."""
        starts = {line.parts[0][0] for lines in sections.values() for line in lines}
        if not all(self.counts.splits("\n", c) for c in starts):  # no boundary at line starts: count texts
            pieces = [[p for i, line in enumerate(lines) for p in ((line.parts if i == 0 else ("\n", *line.parts)))]
                      for lines in sections.values()]
            each, whole = self.counts.joined_each(pieces, SECTION_SEPARATOR)
            return {**dict(zip(sections, each)), "context": whole}
        # Each line starts a token: a text's count is the sum of its lines' counts, each with its line break.
        tokens, whole, names = {}, 0, list(sections)
        for name, lines in sections.items():
            body = sum(self._unit(line, "\n") for line in lines[:-1])
            tokens[name] = body + self._unit(lines[-1], "")
            whole += body + self._unit(lines[-1], SECTION_SEPARATOR if name != names[-1] else "")
        return {**tokens, "context": whole}

    def _unit(self, line: Line, end: str) -> int:
        key = (line.key, end)
        found = self._units.get(key)
        if found is None:
            found = self._units[key] = self.counts.joined([*line.parts, end])
        return found

    def _added(self, text: str, tokens: int) -> int:
        """What the context adds to the prompt: its own count where a token
        boundary falls between it and the prompt's text before it, else
        counted together with that text."""
        prefix = self.budget.prompt_prefix
        if not text or not prefix or self.counts.splits(prefix[-1], text[0]):
            return tokens
        return self.counts.tokenizer.count(prefix + text) - self.counts.count(prefix)


def _show_support(context: Context) -> None:
    """Which kept entities and relations cite each chunk."""
    cited_by: dict[str, list[str]] = {}
    for item in _interleave(context.entities, context.relations):
        for cid in item.sources:
            cited_by.setdefault(cid, []).append(_name(item))
    for chunk in context.chunks:
        chunk.supports = cited_by.get(chunk.id, [])
        chunk.support = len(chunk.supports)


def _fenced(header: str, lines: list[Line]) -> list[Line]:
    """A section of JSON lines: its header, then the rows in a ``json`` code block."""
    return [plain_line(header), plain_line(FENCE_OPEN), *lines, plain_line(FENCE_CLOSE)]


def _reference_line(number: int, doc_id: str, file_path: str | None) -> str:
    return f"[{number}] {file_path or doc_id}"


def _interleave(entities: list[EntityItem], relations: list[RelationItem]) -> list:
    out = []
    for i in range(max(len(entities), len(relations))):
        out += [x[i] for x in (entities, relations) if i < len(x)]
    return out


def _name(item) -> str:
    return item.key if isinstance(item, EntityItem) else " - ".join(item.key)
