"""Which sources an answer cites: its ``[n]`` markers, renumbered in the
order they are first cited.

The context numbers its sources (``[n] path`` lines; a chunk's ``ref``) and
the answer prompt asks for citations by those numbers; the offline answerer
writes them after each quoted sentence. An answer's references are the
sources it cites, not every source of the context: a reader takes each listed
reference as backing the answer. The first source cited becomes ``[1]``, the
next new one ``[2]``, and the answer's markers are rewritten to match.

A marker is ``[n]`` or ``[n, m, ...]`` whose numbers are all numbers of the
context's sources; anything else in brackets (``[2023]``, ``[a]``) is text
and stays as it is. Streamed answers are rewritten piece by piece
(``Citations.feed``): a piece ending inside a possible marker is held back
until the marker closes.

A cited source keeps the chunks its claims quote: when the text before each
of its markers (back to the previous marker or line start) is found word for
word in some of the source's chunks, as the offline answerer's quoted
sentences are, the reference names those chunks (and their pages) only; a
source cited for a paraphrase keeps all of its chunks in the context.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ragkit.query.citation import citation
from ragkit.schema import Reference

MARKER = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
OPEN_MARKER = re.compile(r"\[[\d,\s]*$")
"""A piece's tail that may still become a marker."""
LONGEST_MARKER = 64
"""An open bracket held back longer than this is text, not a marker."""


class Citations:
    """Rewrites an answer's markers to the order of first citation and keeps
    the cited sources (``references``), for one answer."""

    def __init__(self, sources: Sequence[Reference], contents: Mapping[str, str] | None = None) -> None:
        self.sources = {ref.number: ref for ref in sources}
        self.contents = {cid: _squash(text) for cid, text in (contents or {}).items()}
        """Chunk id -> its text, whitespace collapsed: what quoted claims are looked up in."""
        self.order: dict[int, int] = {}
        """Source number -> the number the answer cites it by."""
        self.quoted: dict[int, set[str]] = {}
        """Source number -> the chunks its claims quote."""
        self.paraphrased: set[int] = set()
        """Sources cited for a claim none of their chunks holds word for word."""
        self._held = ""
        self._claim = ""
        self._last_claim = ""

    def rewrite(self, answer: str) -> str:
        """The whole answer, rewritten (the same as feeding it as one piece)."""
        return self.feed(answer) + self.end()

    def feed(self, piece: str) -> str:
        text = self._held + piece
        tail = OPEN_MARKER.search(text)
        cut = tail.start() if tail and len(text) - tail.start() <= LONGEST_MARKER else len(text)
        self._held = text[cut:]
        return self._rewrite(text[:cut])

    def end(self) -> str:
        held, self._held = self._held, ""
        return self._rewrite(held)

    def _rewrite(self, text: str) -> str:
        out, pos = [], 0
        for marker in MARKER.finditer(text):
            out += [text[pos:marker.start()], self._renumber(marker, text[pos:marker.start()])]
            pos = marker.end()
        self._claim += text[pos:]
        return "".join([*out, text[pos:]])

    def _renumber(self, marker: re.Match[str], before: str) -> str:
        numbers = [int(n) for n in marker.group(1).split(",")]
        if not all(n in self.sources for n in numbers):
            self._claim += before + marker.group(0)
            return marker.group(0)
        text, self._claim = self._claim + before, ""
        # The claim is the marker's line back to the previous marker; "[2][3]": the same claim twice.
        claim = _squash(text.splitlines()[-1]) if text.strip() else ""
        claim = self._last_claim = claim or self._last_claim
        for n in numbers:
            self.order.setdefault(n, len(self.order) + 1)
            self._quote(n, claim)
        return "".join(f"[{self.order[n]}]" for n in dict.fromkeys(numbers))

    def _quote(self, number: int, claim: str) -> None:
        claim = claim.removeprefix("- ").removeprefix("* ").strip()
        found = {c for c in self.sources[number].chunk_ids if claim in self.contents.get(c, "")}
        if len(claim) < 12 or not found:  # too short to tell one chunk from another, or not a quote
            self.paraphrased.add(number)
        else:
            self.quoted.setdefault(number, set()).update(found)

    @property
    def references(self) -> list[Reference]:
        """The cited sources, numbered as the rewritten answer cites them."""
        return [self._reference(n, cited) for n, cited in self.order.items()]

    def _reference(self, number: int, cited: int) -> Reference:
        source = self.sources[number]
        update: dict = {"number": cited, "source_number": number}
        quoted = self.quoted.get(number)
        if quoted and number not in self.paraphrased and len(quoted) < len(source.chunk_ids):
            keep = [i for i, c in enumerate(source.chunk_ids) if c in quoted]
            located = len(source.locations) == len(source.chunk_ids)
            locations = [source.locations[i] for i in keep] if located else source.locations
            update.update(chunk_ids=[source.chunk_ids[i] for i in keep], locations=locations,
                          citation=citation(source.file_path or source.doc_id, locations))
        return source.model_copy(update=update)


def _squash(text: str) -> str:
    return " ".join(text.split())


def cited(
    answer: str, sources: Sequence[Reference], contents: Mapping[str, str] | None = None
) -> tuple[str, list[Reference]]:
    """The answer with its markers renumbered, and the sources it cites
    (``contents``: chunk id -> text, to narrow a source to the chunks quoted)."""
    citations = Citations(sources, contents)
    text = citations.rewrite(answer)
    return text, citations.references
