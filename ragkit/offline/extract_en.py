"""Named things in alphabetic-script text, by capitalisation rules.

A name is a run of capitalised words (``Project Haijia``, ``Gu Yao``,
``Bank of China``), an acronym (``NASA``) or a code with letters and digits
(``CB-7``). Runs break at punctuation; ``of``/``von``/... and ``&`` may join two
capitalised words. Not names: stop words, month and day names, honorifics and
role titles (they are cues instead).

A capitalised word at a sentence start (or after only stop words, dates and
numbers: "However, Integration ...") proves nothing. A run there loses its
leading common words ("Delivery Manager Li Na" gives "Li Na"); a single word
there is kept only if it is no common word (not in the lists, no common suffix
such as ``-tion``) and has evidence: a possessive (``Yingchuan's``), a
capitalised use elsewhere in the text, or never being written in lower case in
the text. Heading words are held to the same test. A lone common word is no
name anywhere ("the Board").

Kinds: ``project`` (``Project X``), ``organization`` (last word such as
``Electronics``, ``GmbH``, ``University``), ``product`` (codes), then cues
around the mentions: ``person`` (an honorific or role word before, "led by"
before, "said"/"who"/... after, "X, the manager") and ``location`` ("in X",
"based in X"); else ``other``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragkit.offline.text import (
    COMMON,
    COMMON_SUFFIXES,
    CONNECTORS,
    DATE_WORDS,
    HONORIFICS,
    LATIN_WORD,
    ORG_SUFFIX,
    PROJECT_PREFIX,
    ROLE_WORDS,
    STOP,
    Candidate,
    Sentence,
    base_word,
)

PERSON_AFTER = frozenset(
    """said says told asked wrote confirmed explained noted added believes thinks argued replied decided
    agreed emailed called visited leads heads headed manages joined signed approved who himself herself
    his her""".split()
)
PERSON_BY = frozenset(
    "led headed managed run chaired founded signed approved written reviewed audited coordinated owned".split()
)
_AUXILIARIES = frozenset("has had have will would also then later recently personally".split())
LOCATION_BEFORE = frozenset("in near".split())
LOCATION_BY = frozenset("based located headquartered".split())
_DATE_CODE = re.compile(r"^(?:Q[1-4]|H[12]|FY\d{2,4}|\d+(?:st|nd|rd|th|s|am|pm|k|m|kg|km|mm|cm)?)$", re.I)


@dataclass
class Word:
    text: str
    start: int
    end: int

    @property
    def base(self) -> str:
        return base_word(self.text)[0]

    @property
    def possessive(self) -> bool:
        return base_word(self.text)[1]

    @property
    def low(self) -> str:
        return self.base.casefold()


def words_of(text: str) -> list[Word]:
    return [Word(m.group(), m.start(), m.end()) for m in LATIN_WORD.finditer(text)]


def is_code(word: str) -> bool:
    """Letters and digits together, with a capital: "CB-7", "A320", "3M" (not "Q3", "10am")."""
    has_digit = any(c.isdigit() for c in word)
    has_upper = any(c.isupper() for c in word)
    return has_digit and has_upper and any(c.isalpha() for c in word) and not _DATE_CODE.match(word)


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and any(c.isalpha() for c in word)


def name_word(word: Word) -> bool:
    base = word.base
    if is_code(base):
        return True
    return _capitalised(base) and base.casefold() not in STOP and base.casefold() not in DATE_WORDS


def is_common(word: str) -> bool:
    low = word.casefold()
    return low in COMMON or low in STOP or low in ROLE_WORDS or (
        not word.isupper() and low.endswith(COMMON_SUFFIXES) and len(low) > 5
    )


class Evidence:
    """What the whole text says about single words: written in lower case
    somewhere, or capitalised away from a sentence start."""

    def __init__(self, sentences: list[Sentence]) -> None:
        self.lowercase: set[str] = set()
        self.mid_caps: set[str] = set()
        for sentence in sentences:
            words = words_of(sentence.text)
            for i, word in enumerate(words):
                if word.base.islower():
                    self.lowercase.add(word.low)
                elif not sentence.heading and name_word(word) and not _opens_sentence(i, words):
                    self.mid_caps.add(word.low)

    def single_word_ok(self, word: Word) -> bool:
        """A lone capitalised word at a sentence start."""
        if is_code(word.base):
            return True
        if is_common(word.base) or len(word.base) < 2:
            return False
        return word.possessive or word.low in self.mid_caps or word.low not in self.lowercase


def find_names(sentences: list[Sentence]) -> list[Candidate]:
    """Candidates in order of first appearance; one per spelling."""
    evidence = Evidence(sentences)
    found: dict[str, Candidate] = {}
    for sentence in sentences:
        if _shouting(sentence.text):
            continue
        words = words_of(sentence.text)
        for run in _runs(words, sentence.text):
            _accept(run, words, sentence, evidence, found)
    return list(found.values())


def _shouting(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) > 12 and sum(c.isupper() for c in letters) > 0.6 * len(letters)


def _runs(words: list[Word], text: str) -> list[list[int]]:
    runs: list[list[int]] = []
    current: list[int] = []
    for i, word in enumerate(words):
        joined = bool(current) and _adjacent(text, words[current[-1]], word)
        if name_word(word) or (joined and word.low in HONORIFICS):
            if not joined:
                current = _flush(current, runs)
            current.append(i)
            if word.possessive:
                current = _flush(current, runs)
        elif joined and word.text in CONNECTORS and _joins_next(words, i, text):
            current.append(i)
        else:
            current = _flush(current, runs)
    _flush(current, runs)
    return runs


def _flush(current: list[int], runs: list[list[int]]) -> list[int]:
    if current:
        runs.append(current)
    return []


def _adjacent(text: str, left: Word, right: Word) -> bool:
    gap = text[left.end: right.start]
    if left.possessive:
        return False
    return gap.strip() in ("", "&") or (gap.strip() == "." and left.low in HONORIFICS)


def _joins_next(words: list[Word], i: int, text: str) -> bool:
    return i + 1 < len(words) and name_word(words[i + 1]) and _adjacent(text, words[i], words[i + 1])


def _accept(
    run: list[int], words: list[Word], sentence: Sentence, evidence: Evidence, found: dict[str, Candidate]
) -> None:
    person = False
    while run and (words[run[0]].low in HONORIFICS or words[run[0]].low in ROLE_WORDS):
        person = True
        run = run[1:]
    initial = sentence.heading or (bool(run) and _opens_sentence(run[0], words))
    if initial:
        while len(run) > 1 and is_common(words[run[0]].base) and words[run[0]].low not in PROJECT_PREFIX:
            run = run[1:]
    while run and words[run[-1]].text in CONNECTORS:
        run = run[:-1]
    if not run or not _plausible(run, words, sentence, evidence, initial):
        return
    name = _name_text(run, words, sentence.text)
    if len(name) < 2:
        return
    candidate = found.setdefault(name, Candidate(name))
    candidate.structural = candidate.structural or _structural(run, words)
    if person or _person_cue(run, words, sentence.text):
        candidate.votes["person"] += 1
    elif _location_cue(run, words):
        candidate.votes["location"] += 1


def _opens_sentence(i: int, words: list[Word]) -> bool:
    """Only stop words, dates or numbers before it: "However, Integration ..." """
    return all(w.low in STOP or w.low in DATE_WORDS or w.base.isdigit() for w in words[:i])


def _plausible(run: list[int], words: list[Word], sentence: Sentence, evidence: Evidence, initial: bool) -> bool:
    if len(run) == 1:
        word = words[run[0]]
        if word.low in COMMON or word.low in ORG_SUFFIX or word.low in ROLE_WORDS:
            return False  # "the Board", "our Group": a common word, capitalised
        return not initial or evidence.single_word_ok(word)
    if sentence.heading:
        return _structural(run, words) is not None or not any(
            is_common(words[i].base) for i in run if words[i].text not in CONNECTORS
        )
    return True


def _name_text(run: list[int], words: list[Word], text: str) -> str:
    last = words[run[-1]]
    end = last.start + len(last.base)
    return " ".join(text[words[run[0]].start: end].split())


def _structural(run: list[int], words: list[Word]) -> str | None:
    first, last = words[run[0]].low, words[run[-1]].low
    if len(run) > 1 and (first in PROJECT_PREFIX or last in PROJECT_PREFIX):
        return "project"
    if len(run) > 1 and last in ORG_SUFFIX:
        return "organization"
    if len(run) == 1 and is_code(words[run[0]].base):
        return "product"
    return None


def _person_cue(run: list[int], words: list[Word], text: str) -> bool:
    before = [w.low for w in words[max(0, run[0] - 2): run[0]]]
    after = [w.low for w in words[run[-1] + 1: run[-1] + 6] if w.low not in _AUXILIARIES]
    if before and (before[-1] in ROLE_WORDS or before[-1] in HONORIFICS):
        return True
    if len(before) == 2 and before[-1] == "by" and before[0] in PERSON_BY:
        return True
    if after and after[0] in PERSON_AFTER and not words[run[-1]].possessive:
        return True
    if len(after) >= 3 and after[0] in ("is", "was", "became", "remains") and any(w in ROLE_WORDS for w in after[1:]):
        return True  # "Li Na is the account manager"
    tail = text[words[run[-1]].end: words[run[-1]].end + 2]
    return tail.startswith(",") and len(after) >= 2 and after[0] in ("the", "a", "our") and any(
        w in ROLE_WORDS for w in after[1:]
    )


def _location_cue(run: list[int], words: list[Word]) -> bool:
    before = [w.low for w in words[max(0, run[0] - 2): run[0]]]
    if not before or len(run) > 3:
        return False
    return before[-1] in LOCATION_BEFORE or (len(before) == 2 and before[0] in LOCATION_BY and before[1] in ("in", "at"))
