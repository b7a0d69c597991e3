"""The chunk stage: documents to token-bounded chunks.

Decisions:

- Chunk ids are ``"chunk-" + digest(doc_id, order, content)``. The same document
  always gets the same ids (re-inserting is a no-op), two documents never share
  a chunk (deleting one cannot remove the other's chunks), and two identical
  passages in one document stay two chunks instead of colliding in the stores.
- ``TokenChunker`` windows are exact substrings of the document text, so their
  character offsets (``TokenChunker.spans``) are meaningful. Windows never split
  a character: tiktoken's byte-level BPE can cut a CJK character or an emoji
  between tokens, so window edges are moved back to the start of the character
  they fall in. Whitespace-only windows are dropped.
- Every chunk has at most ``size`` tokens, counted by re-encoding its content
  (``Chunk.tokens``), which is why ``size`` must be at least 4: one character
  can take four byte-level tokens.
- ``MarkdownChunker`` prefixes a chunk with its heading path ("Intro > Setup"
  and a blank line) because ``Chunk`` has no metadata field and the path is what
  makes a lone paragraph retrievable. The prefix is left out when the chunk
  starts with its own top-level heading, where it would repeat it. The rest of
  the content is an exact substring of the document (``MarkdownChunker.pieces``).
- A document with segments (pages, slides, sections from ``ragkit.loaders``)
  is cut at segment boundaries first (``boundary_spans``): whole segments are
  packed up to ``size`` and only a segment too large for one chunk is cut into
  token windows, so a chunk rarely straddles two pages or two sections. Both
  built-in chunkers do this, and every chunk records its ``Location``: the
  character span, the pages it spans and the section most of it is in (``locate``).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from ragkit import ids
from ragkit.protocols import Tokenizer
from ragkit.schema import Chunk, Document, Location
from ragkit.sections.index import MIN_SIZE, check_window


@runtime_checkable
class Chunker(Protocol):
    def chunk(self, doc: Document) -> list[Chunk]: ...


class Span(NamedTuple):
    """``text[start:end]``, which encodes to ``tokens`` tokens."""

    start: int
    end: int
    tokens: int


def make_chunk(
    doc: Document, content: str, order: int, tokens: int, span: tuple[int, int] | None = None
) -> Chunk:
    """``span``: where the chunk's text lies in ``doc.content`` (its ``Location``)."""
    return Chunk(
        id="chunk-" + ids.digest(doc.id, str(order), content),
        doc_id=doc.id,
        content=content,
        order=order,
        tokens=tokens,
        file_path=doc.file_path,
        location=locate(doc, *span) if span is not None else None,
    )


def locate(doc: Document, start: int, end: int) -> Location:
    """The pages and the main section of the segments ``doc.content[start:end]`` overlaps."""
    segments = doc.segments
    if not segments:
        return Location(char_start=start, char_end=end)
    starts = [s.start for s in segments]
    first = max(bisect_right(starts, start) - 1, 0)
    last = max(bisect_left(starts, max(end, start + 1)) - 1, first)
    covered = [s for s in segments[first:last + 1] if s.end > start or s.start == start]
    pages = [s.page for s in covered if s.page is not None]
    # The section most of the chunk's text is in (a chunk starting with a
    # parent's heading line is still cited by the subsection it holds).
    weight: dict[str, int] = {}
    for s in covered:
        if s.section:
            weight[s.section] = weight.get(s.section, 0) + min(s.end, end) - max(s.start, start)
    section = max(weight, key=weight.__getitem__) if weight else None
    return Location(char_start=start, char_end=end, page_start=min(pages, default=None),
                    page_end=max(pages, default=None), unit=doc.unit, section=section)


def boundary_spans(text: str, cuts: Sequence[int], tokenizer: Tokenizer, size: int, overlap: int) -> list[Span]:
    """Spans that end at one of ``cuts`` where they can: the pieces between
    cuts, packed whole up to ``size`` tokens; a piece too large for one is cut
    into token windows (``token_spans``). Covers ``text`` in order."""
    edges = sorted({0, len(text), *(c for c in cuts if 0 < c < len(text))})
    units: list[Span] = []
    for start, end in zip(edges, edges[1:]):
        tokens = tokenizer.count(text[start:end])
        if tokens <= size:
            units.append(Span(start, end, tokens))
        else:  # an oversized piece: windows, never packed with others
            units += [Span(start + w.start, start + w.end, -w.tokens) for w in
                      token_spans(text[start:end], tokenizer, size, overlap)]
    spans: list[Span] = []
    i = 0
    while i < len(units):
        if units[i].tokens < 0:
            spans.append(Span(units[i].start, units[i].end, -units[i].tokens))
            i += 1
            continue
        estimate, j = units[i].tokens, i + 1
        while j < len(units) and units[j].tokens >= 0 and estimate + units[j].tokens <= size:
            estimate += units[j].tokens
            j += 1
        while True:  # token counts are not additive at the seams: check the real count
            tokens = tokenizer.count(text[units[i].start:units[j - 1].end])
            if tokens <= size or j == i + 1:
                break
            j -= 1
        spans.append(Span(units[i].start, units[j - 1].end, tokens))
        i = j
    return spans


def chunk_segmented(doc: Document, tokenizer: Tokenizer, size: int, overlap: int) -> list[Chunk]:
    """Chunks of a document with segments, cut at their boundaries first."""
    cuts = [s.start for s in doc.segments]
    spans = [s for s in boundary_spans(doc.content, cuts, tokenizer, size, overlap)
             if doc.content[s.start:s.end].strip()]
    return [make_chunk(doc, doc.content[s.start:s.end], order, s.tokens, (s.start, s.end))
            for order, s in enumerate(spans)]


# --- token windows ---------------------------------------------------------------


def token_bytes(tokenizer: Tokenizer, tokens: Sequence[int]) -> list[bytes]:
    """The bytes each token stands for.

    Uses the tokenizer's ``token_bytes`` if it has one, then tiktoken's encoding
    (``TiktokenTokenizer`` keeps it in ``_enc``), then single-token ``decode``,
    which is exact only for tokenizers whose tokens never split a character.
    """
    own = getattr(tokenizer, "token_bytes", None)
    if callable(own):
        return list(own(tokens))
    encoding = getattr(tokenizer, "_enc", None)
    if encoding is not None and hasattr(encoding, "decode_tokens_bytes"):
        return encoding.decode_tokens_bytes(list(tokens))
    return [tokenizer.decode([t]).encode("utf-8") for t in tokens]


def _char_offsets(tokenizer: Tokenizer, text: str, tokens: Sequence[int]) -> list[int]:
    """For each token boundary 0..n, the offset of the character it falls in.

    A boundary inside a multi-byte character maps to that character's start, so
    ``text[f[i]:f[j]]`` never holds part of a character.
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            "the text contains lone surrogates (not valid Unicode); "
            "load it with ragkit.pipeline.load, which replaces them"
        ) from exc
    pieces = token_bytes(tokenizer, tokens)
    if b"".join(pieces) != data:
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name', tokenizer)!r} does not map tokens back to the text's bytes; "
            "give it a token_bytes(tokens) -> list[bytes] method"
        )
    byte_at = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)), out=byte_at[1:])
    is_start = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80  # not a continuation byte
    char_of_byte = np.empty(len(data) + 1, dtype=np.int64)
    np.cumsum(is_start, out=char_of_byte[:-1])
    char_of_byte[:-1] -= 1
    char_of_byte[-1] = len(text)
    return char_of_byte[byte_at].tolist()


def token_spans(text: str, tokenizer: Tokenizer, size: int, overlap: int) -> list[Span]:
    """Windows of at most ``size`` tokens, each starting ``size - overlap`` tokens
    after the previous one, aligned to characters, covering ``text`` in order.

    Consecutive spans never leave a gap. The last span ends at the end of the
    text and no span lies wholly inside the previous one.
    """
    if not text:
        return []
    tokens = tokenizer.encode(text)
    f = _char_offsets(tokenizer, text, tokens)
    n, step = len(tokens), size - overlap
    spans: list[Span] = []
    start = 0
    while True:
        end = min(start + size, n)
        while f[end] <= f[start]:  # the window holds only part of one character
            end += 1
        count = tokenizer.count(text[f[start]:f[end]])
        # Re-encoding a cut-out can take more tokens than the window had (BPE
        # merges differ at its edges, a moved-back edge adds a partial character).
        while count > size:
            lower = max(start + 1, end - (count - size))
            while lower < end and f[lower] <= f[start]:
                lower += 1
            if lower >= end:
                break
            end = lower
            count = tokenizer.count(text[f[start]:f[end]])
        spans.append(Span(f[start], f[end], count))
        if end >= n:
            return spans
        following = min(start + step, end - overlap)
        while f[following] <= f[start]:
            following += 1
        start = following


class TokenChunker:
    """Fixed windows over token ids (LightRAG's default chunking)."""

    name = "token"

    def __init__(self, tokenizer: Tokenizer, size: int = 1200, overlap: int = 100) -> None:
        check_window(size, overlap)
        self.tokenizer, self.size, self.overlap = tokenizer, size, overlap

    def spans(self, text: str) -> list[Span]:
        return token_spans(text, self.tokenizer, self.size, self.overlap)

    def chunk(self, doc: Document) -> list[Chunk]:
        if doc.segments:
            return chunk_segmented(doc, self.tokenizer, self.size, self.overlap)
        kept = [s for s in self.spans(doc.content) if doc.content[s.start:s.end].strip()]
        return [make_chunk(doc, doc.content[s.start:s.end], order, s.tokens, (s.start, s.end))
                for order, s in enumerate(kept)]


# --- markdown ------------------------------------------------------------------------

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")


@dataclass
class _Section:
    start: int
    path: tuple[str, ...]
    heading: bool
    blocks: list[int]
    """Offsets where blocks start (paragraphs, fenced code, the heading line)."""
    end: int = 0


def _sections(text: str) -> list[_Section]:
    """Split at ATX headings outside fenced code; blocks at blank lines and fences."""
    sections = [_Section(0, (), False, [0])]
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    previous_blank = False
    pos = 0
    for line in text.split("\n"):
        here, pos = pos, pos + len(line) + 1
        current = sections[-1]
        if fence is not None:
            close = _FENCE_CLOSE.fullmatch(line)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                fence = None
                if pos < len(text):
                    current.blocks.append(pos)  # what follows a fence is a new block
            continue
        heading = _HEADING.fullmatch(line)
        opening = _FENCE_OPEN.fullmatch(line)
        if heading:
            level = len(heading.group(1))
            title = _CLOSING_HASHES.sub("", heading.group(2) or "").strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            sections.append(_Section(here, tuple(t for _, t in stack), True, [here]))
        elif opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
            if here != current.blocks[-1]:
                current.blocks.append(here)
        elif previous_blank and line.strip() and here != current.blocks[-1]:
            current.blocks.append(here)
        previous_blank = not line.strip()
    for section, following in zip(sections, sections[1:]):
        section.end = following.start
    sections[-1].end = len(text)
    return [s for s in sections if s.end > s.start]


class Piece(NamedTuple):
    """A Markdown chunk: ``prefix + text[start:end]``, ``tokens`` tokens in all."""

    prefix: str
    start: int
    end: int
    tokens: int


@dataclass
class _Unit:
    start: int
    end: int
    path: tuple[str, ...]
    at_heading: bool
    tokens: int
    window: bool = False
    """A token window of an oversized block; it overlaps its neighbours, so it is never packed."""
    lead: bool = False
    """The heading block of a split section: it belongs with the block after it."""


class MarkdownChunker:
    """Sections by heading, packed up to ``size`` tokens.

    A section too large for one chunk is split at blank lines, with fenced code
    kept whole; a block still too large is cut into token windows.
    """

    name = "markdown"

    def __init__(self, tokenizer: Tokenizer, size: int = 1200, overlap: int = 100) -> None:
        check_window(size, overlap)
        self.tokenizer, self.size, self.overlap = tokenizer, size, overlap
        self._prefixes: dict[tuple[tuple[str, ...], bool], tuple[str, int]] = {}

    def _prefix(self, path: tuple[str, ...], at_heading: bool) -> tuple[str, int]:
        key = (path, at_heading)
        if key not in self._prefixes:
            titles = [t for t in path if t]
            prefix = ""
            if titles and not (at_heading and len(path) == 1):
                # A very long path would eat the window; fall back to the last title, then none.
                for candidate in (" > ".join(titles), titles[-1]):
                    if self.tokenizer.count(candidate + "\n\n") <= self.size // 4:
                        prefix = candidate + "\n\n"
                        break
            self._prefixes[key] = (prefix, self.tokenizer.count(prefix) if prefix else 0)
        return self._prefixes[key]

    def _fits(self, tokens: int, path: tuple[str, ...], at_heading: bool) -> bool:
        return tokens + self._prefix(path, at_heading)[1] <= self.size

    def _units(self, text: str) -> list[_Unit]:
        count = self.tokenizer.count
        units: list[_Unit] = []
        for sec in _sections(text):
            tokens = count(text[sec.start:sec.end])
            if self._fits(tokens, sec.path, sec.heading):
                units.append(_Unit(sec.start, sec.end, sec.path, sec.heading, tokens))
                continue
            budget = max(self.size - self._prefix(sec.path, False)[1], MIN_SIZE)
            overlap = min(self.overlap, budget // 2)
            for start, end in zip(sec.blocks, [*sec.blocks[1:], sec.end]):
                if end <= start:
                    continue
                at_heading = sec.heading and start == sec.start
                tokens = count(text[start:end])
                if self._fits(tokens, sec.path, at_heading):
                    units.append(_Unit(start, end, sec.path, at_heading, tokens, lead=at_heading))
                    continue
                for span in token_spans(text[start:end], self.tokenizer, budget, overlap):
                    units.append(
                        _Unit(start + span.start, start + span.end, sec.path,
                              at_heading and span.start == 0, span.tokens, window=True)
                    )
        return units

    def pieces(self, text: str) -> list[Piece]:
        units = self._units(text)
        pieces: list[Piece] = []
        i = 0
        while i < len(units):
            first = units[i]
            prefix, estimate = self._prefix(first.path, first.at_heading)
            estimate += first.tokens
            j = i + 1
            while j < len(units) and not first.window and not units[j].window:
                if estimate + units[j].tokens > self.size:
                    break
                estimate += units[j].tokens
                j += 1
            # Token counts are not additive at the seams; check the real count.
            while True:
                body = text[first.start:units[j - 1].end]
                tokens = self.tokenizer.count(prefix + body)
                if tokens <= self.size or j == i + 1:
                    break
                j -= 1
            if tokens > self.size:
                prefix, tokens = "", self.tokenizer.count(body)
            elif j - i > 1 and j < len(units) and units[j - 1].lead:
                # Do not end a chunk with a heading whose text is in the next one.
                j -= 1
                body = text[first.start:units[j - 1].end]
                tokens = self.tokenizer.count(prefix + body)
            pieces.append(Piece(prefix, first.start, units[j - 1].end, tokens))
            i = j
        return pieces

    def chunk(self, doc: Document) -> list[Chunk]:
        if doc.segments:  # a loaded file: its segments carry the headings
            return chunk_segmented(doc, self.tokenizer, self.size, self.overlap)
        text = doc.content
        kept = [p for p in self.pieces(text) if text[p.start:p.end].strip()]
        return [make_chunk(doc, p.prefix + text[p.start:p.end], order, p.tokens, (p.start, p.end))
                for order, p in enumerate(kept)]


# --- registry --------------------------------------------------------------------------

def get_chunker(name: str, tokenizer: Tokenizer, size: int = 1200, overlap: int = 100) -> Chunker:
    """A chunker registered under ``name`` by any plugin (built-ins: ``token``,
    ``markdown``), or given as ``package.module:Class``."""
    from ragkit.plugins import get_registry

    return get_registry().get("chunker", name)(tokenizer, size, overlap)
