"""Query keywords for MuSiQue questions, derived from the question alone.

The data set's rule (its README): low-level = the corpus's entity names found in
the question (case-insensitive, longest first, non-overlapping, on word
boundaries); high-level = the question's content words (stop words removed).
No recording exists for queries, and no gold information leaks this way. The
replay LLM answers keyword prompts with these, and benchmarks pass them to
every system compared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves whose""".split()
)
_WORD = re.compile(r"\w+(?:['’]\w+)*")


class EntityNames:
    """Entity names of a corpus, matched in questions longest first."""

    def __init__(self, names: Iterable[str]) -> None:
        by_fold: dict[str, str] = {}
        for name in names:
            clean = " ".join(name.split())
            if clean and any(ch.isalnum() for ch in clean):
                by_fold.setdefault(clean.casefold(), clean)
        # Longest first; ties by text so the result is the same every run.
        self.names = sorted(by_fold.items(), key=lambda kv: (-len(kv[0]), kv[0]))

    def find(self, question: str) -> list[str]:
        """Names occurring in ``question``, in the order they occur."""
        text = question.casefold()
        taken: list[tuple[int, int]] = []
        found: list[tuple[int, str]] = []
        for folded, name in self.names:
            start = text.find(folded)
            while start != -1:
                end = start + len(folded)
                if _bounded(text, start, end) and not any(s < end and start < e for s, e in taken):
                    taken.append((start, end))
                    found.append((start, name))
                    break
                start = text.find(folded, start + 1)
        return [name for _, name in sorted(found)]


def content_words(question: str) -> list[str]:
    words = [w for w in _WORD.findall(question) if w.casefold() not in STOP_WORDS]
    return list(dict.fromkeys(words))


def question_keywords(question: str, names: EntityNames) -> tuple[list[str], list[str]]:
    """(high-level, low-level) keywords of ``question``."""
    return content_words(question), names.find(question)


def _bounded(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() and text[start].isalnum()) and not (after.isalnum() and text[end - 1].isalnum())
