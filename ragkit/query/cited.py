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
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragkit.schema import Reference

MARKER = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
OPEN_MARKER = re.compile(r"\[[\d,\s]*$")
"""A piece's tail that may still become a marker."""
LONGEST_MARKER = 64
"""An open bracket held back longer than this is text, not a marker."""


class Citations:
    """Rewrites an answer's markers to the order of first citation and keeps
    the cited sources (``references``), for one answer."""

    def __init__(self, sources: Sequence[Reference]) -> None:
        self.sources = {ref.number: ref for ref in sources}
        self.order: dict[int, int] = {}
        """Source number -> the number the answer cites it by."""
        self._held = ""

    def rewrite(self, answer: str) -> str:
        """The whole answer, rewritten (the same as feeding it as one piece)."""
        return self.feed(answer) + self.end()

    def feed(self, piece: str) -> str:
        text = self._held + piece
        tail = OPEN_MARKER.search(text)
        cut = tail.start() if tail and len(text) - tail.start() <= LONGEST_MARKER else len(text)
        self._held = text[cut:]
        return MARKER.sub(self._renumber, text[:cut])

    def end(self) -> str:
        held, self._held = self._held, ""
        return MARKER.sub(self._renumber, held)

    def _renumber(self, marker: re.Match[str]) -> str:
        numbers = [int(n) for n in marker.group(1).split(",")]
        if not all(n in self.sources for n in numbers):
            return marker.group(0)
        for n in numbers:
            self.order.setdefault(n, len(self.order) + 1)
        return "".join(f"[{self.order[n]}]" for n in dict.fromkeys(numbers))

    @property
    def references(self) -> list[Reference]:
        """The cited sources, numbered as the rewritten answer cites them."""
        return [
            self.sources[n].model_copy(update={"number": cited, "source_number": n})
            for n, cited in self.order.items()
        ]


def cited(answer: str, sources: Sequence[Reference]) -> tuple[str, list[Reference]]:
    """The answer with its markers renumbered, and the sources it cites."""
    citations = Citations(sources)
    text = citations.rewrite(answer)
    return text, citations.references
