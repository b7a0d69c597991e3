"""Large documents: chunking in segments and committing in windows of chunks.

Why: chunking a whole text at once holds its token ids, their bytes and
per-byte offset arrays (about 40 bytes per byte of text: 2 GB for 50 MB), and
extracting a whole document before committing it holds every chunk's
extraction (the offline LLM's answers are ~15 times the chunk text) until the
document ends. Both grow with the file; these helpers keep them bounded.

- :func:`iter_chunks` chunks a text longer than ``segment_chars`` one segment
  at a time, segments cut at a paragraph break (else a line break, else a
  space) near the segment size. Chunks never cross a segment seam, so a
  document above the threshold gets slightly different chunks than one pass
  would give, but always the same ones: chunk ids stay deterministic. Text up
  to the threshold is chunked exactly as ``chunker.chunk`` does.
- The indexer (``ragkit.pipeline.index``) extracts, merges and commits a
  document of more than ``IndexConfig.window_chunks`` chunks one window at a
  time. After each window's flush it records how many chunks are durable in the
  status record's metadata under :data:`COMMITTED_MARK`; the document stays
  ``processing`` until its last window. A run cut short resumes after the
  recorded windows (only the chunks after the mark are undone and redone).
"""

from __future__ import annotations

from collections.abc import Iterator

from ragkit.pipeline.chunk import Chunker, make_chunk
from ragkit.schema import Chunk, Document

SEGMENT_CHARS = 1_000_000
"""Text longer than this is chunked segment by segment (~40 MB transient per segment)."""

COMMITTED_MARK = "ragkit_committed_chunks"
"""Status metadata key: chunks of a ``processing`` document already committed."""

_BREAKS = ("\n\n", "\n", " ")


def segments(text: str, size: int = SEGMENT_CHARS) -> Iterator[tuple[int, int]]:
    """``(start, end)`` offsets covering ``text`` in order, each at most ``size``
    characters, cut at the last break in the second half of the window."""
    start, n = 0, len(text)
    while start < n:
        end = start + size
        if end >= n:
            yield start, n
            return
        for sep in _BREAKS:
            at = text.rfind(sep, start + size // 2, end)
            if at != -1:
                end = at + len(sep)
                break
        yield start, end
        start = end


def iter_chunks(chunker: Chunker, doc: Document, segment_chars: int = SEGMENT_CHARS) -> Iterator[Chunk]:
    """The document's chunks in order, chunked at most ``segment_chars`` of text at a time."""
    if len(doc.content) <= segment_chars or doc.segments:
        # A loaded file (pages, sections) is chunked along its own segments,
        # which bounds the transient per segment and keeps its page locations.
        yield from chunker.chunk(doc)
        return
    order = 0
    for start, end in segments(doc.content, segment_chars):
        part = Document(id=doc.id, content=doc.content[start:end], file_path=doc.file_path)
        for chunk in chunker.chunk(part):
            loc = chunk.location
            span = (start + loc.char_start, start + loc.char_end) if loc is not None else None
            yield make_chunk(doc, chunk.content, order, chunk.tokens, span)
            order += 1


def chunk_ids(chunker: Chunker, doc: Document, segment_chars: int = SEGMENT_CHARS) -> list[str]:
    """Only the ids (the contents are dropped as they are made)."""
    return [c.id for c in iter_chunks(chunker, doc, segment_chars)]


def committed_mark(metadata: dict) -> int:
    """The recorded number of committed chunks (0 when none or malformed)."""
    value = metadata.get(COMMITTED_MARK)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
