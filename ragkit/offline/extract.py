"""One chunk's entities and relations by rules, rendered in the extraction row format.

1. Sentences (``text.split_sentences``); names from the English rules over the
   whole chunk (they weigh evidence across sentences) and from the Chinese rules
   per sentence.
2. A short name that is a longer name minus generic words ("Haijia" and
   "Project Haijia", "Yingchuan" and "Yingchuan Electronics") is an alias of it
   within the chunk, when only one longer name fits.
3. Mentions: every spelling found in each sentence, longest first.
4. An entity's description is the sentences that mention it. Two entities in
   one sentence are related: the description is the sentence, the keywords are
   its content words (those between the two names first) and its dates, the
   strength is higher for neighbours and for pairs that meet in more sentences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ragkit.ids import normalize_name
from ragkit.offline import extract_en, extract_zh
from ragkit.offline.text import (
    LATIN_CHAR,
    ORG_SUFFIX,
    PROJECT_PREFIX,
    Candidate,
    Sentence,
    date_phrases,
    has_cjk,
    is_content_word,
    one_line,
    split_sentences,
)
from ragkit.core.prompts import DEFAULT_ENTITY_TYPES, render_rows
from ragkit.schema import Entity, Relation

MAX_ENTITIES = 80
"""Per chunk, in order of first mention."""
MAX_PAIR_ENTITIES = 8
"""Entities of one sentence that take part in relations (the first ones)."""
MAX_DESCRIPTION_SENTENCES = 6
MAX_DESCRIPTION_CHARS = 2000
MAX_KEYWORDS = 6
GENERIC_NAME_WORDS = PROJECT_PREFIX | ORG_SUFFIX
KIND_TYPES = {
    "person": ("person", "people", "character"),
    "organization": ("organization", "organisation", "company", "org"),
    "location": ("location", "place", "geo", "gpe", "city", "country"),
    "project": ("project", "programme", "program"),
    "product": ("product", "technology", "equipment"),
}


@dataclass
class _Entity:
    candidate: Candidate
    sentences: list[int] = field(default_factory=list)


@dataclass
class _Pair:
    source: str
    target: str
    sentences: list[int] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    adjacent: bool = False


def extract(text: str, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES) -> tuple[list[Entity], list[Relation]]:
    sentences = split_sentences(text)
    candidates = find_candidates(sentences)
    canonical = _aliases(candidates)
    finder = MentionFinder(canonical)
    entities: dict[str, _Entity] = {}
    pairs: dict[tuple[str, str], _Pair] = {}
    for number, sentence in enumerate(sentences):
        mentions = finder.find(sentence.text)
        for name, _, _ in mentions:
            entity = entities.setdefault(name, _Entity(candidates[normalize_name(name)]))
            if number not in entity.sentences:
                entity.sentences.append(number)
        if not sentence.heading:
            _relate(mentions, sentence.text, number, pairs, set(list(entities)[:MAX_ENTITIES]))
    kept = dict(list(entities.items())[:MAX_ENTITIES])
    return (
        [_entity_row(name, e, sentences, entity_types) for name, e in kept.items()],
        [_relation_row(p, sentences) for p in pairs.values() if p.source in kept and p.target in kept],
    )


def extraction_rows(text: str, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES) -> str:
    """The whole answer to an extraction prompt, ``<|COMPLETE|>`` included."""
    entities, relations = extract(text, entity_types)
    return render_rows(entities, relations)


def find_candidates(sentences: list[Sentence]) -> dict[str, Candidate]:
    """Every name of the chunk by normalised name, first spelling kept, evidence merged."""
    found: dict[str, Candidate] = {}
    english = extract_en.find_names(sentences)
    chinese = [c for s in sentences if has_cjk(s.text) for c in extract_zh.find_names(s.text)]
    for candidate in [*english, *chinese]:
        key = normalize_name(candidate.name)
        if not key:
            continue
        known = found.setdefault(key, Candidate(candidate.name))
        known.structural = known.structural or candidate.structural
        known.votes.update(candidate.votes)
    return found


def _aliases(candidates: dict[str, Candidate]) -> dict[str, str]:
    """Each spelling (as written) to the canonical spelling it stands for."""
    names = sorted((c.name for c in candidates.values()), key=lambda n: (-len(n), n))
    canonical: dict[str, str] = {}
    for name in names:
        longer = {canonical[other] for other in names if len(other) > len(name) and _generic_extension(name, other)}
        canonical[name] = longer.pop() if len(longer) == 1 else name
    return canonical


def _generic_extension(short: str, long: str) -> bool:
    """``long`` is ``short`` plus generic words only ("Project" + "Haijia", 颖川 + 电子)."""
    if has_cjk(long):
        return long.startswith(short) and extract_zh.is_suffix(long[len(short):])
    short_words, long_words = short.split(), long.split()
    n = len(short_words)
    for i in range(len(long_words) - n + 1):
        if long_words[i: i + n] == short_words:
            rest = long_words[:i] + long_words[i + n:]
            return bool(rest) and all(w.casefold().rstrip(".") in GENERIC_NAME_WORDS for w in rest)
    return False


class MentionFinder:
    """Finds given names in texts, longest first; Latin names only at word edges."""

    def __init__(self, canonical: dict[str, str], ignore_case: bool = False) -> None:
        self.canonical = {(k.casefold() if ignore_case else k): v for k, v in canonical.items()}
        self.ignore_case = ignore_case
        parts = [_name_pattern(name) for name in sorted(canonical, key=lambda n: (-len(n), n))]
        flags = re.IGNORECASE if ignore_case else 0
        self.pattern = re.compile("|".join(parts), flags) if parts else None

    def find(self, text: str) -> list[tuple[str, int, int]]:
        """(canonical name, start, end) of each mention, in order."""
        if self.pattern is None:
            return []
        out = []
        for match in self.pattern.finditer(text):
            key = match.group().casefold() if self.ignore_case else match.group()
            if key in self.canonical:
                out.append((self.canonical[key], match.start(), match.end()))
        return out


def _name_pattern(name: str) -> str:
    escaped = re.escape(name)
    if re.match(LATIN_CHAR, name[0]):
        escaped = f"(?<!{LATIN_CHAR}){escaped}"
    if re.match(LATIN_CHAR, name[-1]):
        escaped = f"{escaped}(?!{LATIN_CHAR})"
    return escaped


def _relate(
    mentions: list[tuple[str, int, int]], text: str, number: int, pairs: dict[tuple[str, str], _Pair], allowed: set[str]
) -> None:
    firsts: dict[str, tuple[int, int]] = {}
    order: list[str] = []
    for name, start, end in mentions:
        if name in allowed and name not in firsts:
            firsts[name] = (start, end)
            order.append(name)
    order = order[:MAX_PAIR_ENTITIES]
    for i, a in enumerate(order):
        for j in range(i + 1, len(order)):
            b = order[j]
            key = tuple(sorted((normalize_name(a), normalize_name(b))))
            if key[0] == key[1]:
                continue
            pair = pairs.setdefault(key, _Pair(a, b))  # type: ignore[arg-type]
            if number not in pair.sentences:
                pair.sentences.append(number)
                pair.keywords += _keywords(text, firsts[a], firsts[b], [(s, e) for _, s, e in mentions])
            pair.adjacent = pair.adjacent or j == i + 1


def _keywords(text: str, a: tuple[int, int], b: tuple[int, int], names: list[tuple[int, int]]) -> list[str]:
    """Content words (between the two names first, then the rest) and dates."""
    low, high = min(a[1], b[1]), max(a[0], b[0])
    phrases = [p for p in content_phrases(text) if not any(s < p[2] and p[1] < e for s, e in names)]
    between = [p[0] for p in phrases if p[1] >= low and p[2] <= high]
    others = [p[0] for p in phrases if not (p[1] >= low and p[2] <= high)]
    dates = [d[0] for d in date_phrases(text)]
    return [*between, *dates, *others]


def content_phrases(text: str) -> list[tuple[str, int, int]]:
    """Runs of English content words (lower case) and Chinese nouns and verbs, with offsets."""
    out: list[tuple[str, int, int]] = []
    run: list[extract_en.Word] = []
    words = extract_en.words_of(text)
    for k, word in enumerate([*words, None]):
        keep = word is not None and _content(word, initial=k == 0)
        joined = keep and run and not text[run[-1].end: word.start].strip() and not run[-1].possessive and len(run) < 3
        if run and not joined:
            out.append((" ".join(w.base.casefold() for w in run), run[0].start, run[-1].end))
            run = []
        if keep:
            run.append(word)
    out += extract_zh.content_words(text)
    return sorted(out, key=lambda p: p[1])


def _content(word: extract_en.Word, initial: bool) -> bool:
    """Lower-case content words; a capitalised common word only at a sentence start."""
    if not is_content_word(word.base) or word.base[0].isdigit():
        return False
    return word.base.islower() or (initial and extract_en.is_common(word.base) and not word.base.isupper())


def _entity_row(name: str, entity: _Entity, sentences: list[Sentence], entity_types: Sequence[str]) -> Entity:
    body = [n for n in entity.sentences if not sentences[n].heading] or entity.sentences
    parts: list[str] = []
    for n in body[:MAX_DESCRIPTION_SENTENCES]:
        if sum(len(p) + 1 for p in parts) + len(sentences[n].text) > MAX_DESCRIPTION_CHARS and parts:
            break
        parts.append(sentences[n].text)
    kind = entity.candidate.kind()
    return Entity(name=name, type=entity_type(kind, entity_types), description=_field(" ".join(parts)))


def _relation_row(pair: _Pair, sentences: list[Sentence]) -> Relation:
    description = " ".join(sentences[n].text for n in pair.sentences[:MAX_DESCRIPTION_SENTENCES])
    keywords = list(dict.fromkeys(k for k in pair.keywords if k))[:MAX_KEYWORDS]
    strength = min(10.0, (6.0 if pair.adjacent else 3.0) + 2.0 * (len(pair.sentences) - 1))
    return Relation(
        source=pair.source, target=pair.target, keywords=_field(", ".join(keywords)),
        description=_field(description[:MAX_DESCRIPTION_CHARS]), strength=strength,
    )


def entity_type(kind: str, entity_types: Sequence[str]) -> str:
    """The asked type that fits ``kind``, else "other" (as the prompt instructs)."""
    asked = {t.strip().casefold(): t.strip() for t in entity_types if t.strip()}
    for option in (kind, *KIND_TYPES.get(kind, ())):
        if option in asked:
            return asked[option]
    return "other"


def _field(text: str) -> str:
    """One line, no delimiter, and no surrounding quote pair the parser would strip."""
    text = one_line(text)
    while len(text) >= 2 and (text[0], text[-1]) in (('"', '"'), ("`", "`"), ("\u201c", "\u201d")):
        text = text[1:-1].strip()
    return text
