"""When two entity names are one entity: the name rules of entity resolution.

An extraction names the same thing in several ways ("The Rank Organisation"
and "Rank Organisation", "U.S." and "United States", "Nicholas C. Peroff" and
"Nicholas Peroff", "華為" and "华为", "北京大学" and "北大"); each is a node of
its own, and the edges of one entity are split among them. These rules read
two entity keys and say ``SAME``, ``MAYBE`` or nothing (``match``). They read
the names only, never what was said about them, for three reasons:

- exactness: a verdict is a pure function of two keys, so the links of a
  workspace are a function of its set of entities, and deleting a document
  leaves the links a fresh index of the rest would have (``core/alias_index``);
- access: a user who may see both entities may see that their names are
  aliases; a verdict taken from descriptions would carry what documents the
  user may not read say about them;
- cost: candidates come from blocks (``blocks``), so each new entity is
  compared with the few names that share a block, not with all.

Precision comes first (a wrong link joins two entities' neighbourhoods in the
walk). ``SAME`` is what the form of the names proves: equal cores (case,
accents, articles, punctuation, width, traditional or simplified characters,
legal-form words dropped), middle initials ("George W. Bush"), initials with
dots ("U.S."), a Chinese abbreviation. ``MAYBE`` is what only knowledge of the
world tells: an acronym without dots ("NBA": the league, or the National Bank
of Austria), one side's qualifier ("Iron Maiden (album)" is not the band), a
longer form ("British European Airways" is not British Airways). Those are
linked only by the optional model check (``[index] alias_check``). Measured
on the alias sets in ``tests/fixtures/aliases`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

SAME: Literal["same"] = "same"
MAYBE: Literal["maybe"] = "maybe"
Verdict = tuple[Literal["same", "maybe"], str]
"""(how sure, why): why is the rule's name, shown by ``ragkit graph aliases``."""

ARTICLES = frozenset({"the", "a", "an"})
CONNECTIVES = frozenset({"of", "the", "and", "for", "in", "on", "at", "to", "de", "du", "des", "la", "le", "y", "und"})
"""Words an acronym skips ("United States of America": USA)."""
SUFFIXES = frozenset({"inc", "incorporated", "ltd", "limited", "llc", "plc", "corp", "corporation", "co", "gmbh", "pvt"})
"""Legal-form words that do not change which company a name means."""
CJK_SUFFIXES = ("股份有限公司", "有限责任公司", "有限公司", "株式会社", "集团", "控股", "公司")
"""The same for Chinese and Japanese names (stripped repeatedly: 腾讯控股有限公司 is 腾讯)."""
CJK_KINDS = ("大学", "学院", "银行", "集团", "公司", "电视台", "医院")
"""What a short name leaves out of the full one (清华 of 清华大学) when it is not a place (北京)."""
PARTS = frozenset({"season", "series", "part", "volume", "vol", "book", "episode", "chapter", "disc", "round", "stage"})
"""A qualifier starting with one of these names a part, not the whole ("Jessica
Jones (season 1)" is not "Jessica Jones")."""
_QUALIFIER = re.compile(
    r"^(?P<name>.+?)\s*(?:\((?P<paren>[^()]*)\)|,\s+(?P<comma>[^\W\d_][^\W\d_ ]*(?: [^\W\d_]+){0,2}))$")
"""A trailing parenthesis ("(diplomat)"), or a comma and up to three words of
letters (", Rhode Island"): what a title adds to tell a name's bearers apart."""
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"\w+")
_ROMAN = re.compile(r"^m{0,3}(c[md]|d?c{0,3})(x[cl]|l?x{0,3})(i[xv]|v?i{0,3})$")
_DOTTED = re.compile(r"^(?:\w\.\s?){2,}$")


@dataclass(frozen=True)
class Name:
    """An entity key read for matching."""

    key: str
    words: tuple[str, ...]
    """The core's words (characters, for ``cjk``): case and accents folded, no
    articles, punctuation, legal form or qualifier."""
    qualifier: str = ""
    """What a parenthesis or a trailing comma adds ("diplomat", "california")."""
    cjk: bool = False
    """Written in Chinese or Japanese characters."""
    dotted: bool = False
    """Written as initials with dots ("U.S.")."""
    stated: str = ""
    """The acronym the name gives itself ("Royal Air Force (RAF)": "raf")."""

    @property
    def core(self) -> str:
        return ("" if self.cjk else " ").join(self.words)


@lru_cache(maxsize=65536)
def read(key: str) -> Name:
    """The entity key ``key`` (``ragkit.ids.normalize_name``'s form) as a ``Name``."""
    text = unicodedata.normalize("NFKC", key).casefold().replace("&", " and ")
    qualifier = ""
    found = _QUALIFIER.match(text)
    if found:
        qualifier = _words(found.group("paren") or found.group("comma") or "")
        if all(w in SUFFIXES for w in qualifier.split()):  # "Publix Super Markets, Inc."
            qualifier = ""
        text = found.group("name")
    if _CJK.search(text) and not re.search(r"[a-z0-9]", text):
        return Name(key, tuple(_cjk_core(text)), qualifier, cjk=True)
    words = _words(text).split()
    if len(words) > 1 and words[0] in ARTICLES:
        words = words[1:]
    while len(words) > 1 and words[-1] in SUFFIXES:
        words = words[:-1]
    if qualifier and qualifier in _acronyms(tuple(words)):  # "Royal Air Force (RAF)" states its acronym
        return Name(key, tuple(words), dotted=False, stated=qualifier)
    return Name(key, tuple(words), qualifier, dotted=bool(_DOTTED.match(text.strip())))


def _words(text: str) -> str:
    """Accents off, then words: "U.S." is "us", "O'Brien" is "obrien" (dots and
    apostrophes join), other marks split."""
    bare = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return " ".join(_WORD.findall(re.sub(r"[.'\u2019]", "", bare)))


def _cjk_core(text: str) -> str:
    core = "".join(ch for ch in _simplified(text) if _CJK.match(ch) or ch.isalnum())
    stripped = True
    while stripped:
        stripped = False
        for suffix in CJK_SUFFIXES:
            if core.endswith(suffix) and len(core) - len(suffix) >= 2:
                core, stripped = core[: -len(suffix)], True
    return core


def _simplified(text: str) -> str:
    return _converter().convert(text)


@lru_cache(maxsize=1)
def _converter():
    import opencc  # a native converter with its dictionaries: loaded on the first Chinese name

    return opencc.OpenCC("t2s")


def blocks(name: Name) -> set[str]:
    """The block keys of ``name``: two names that ``match`` always share one, so
    comparing a name with the others of its blocks finds all its aliases."""
    if not name.words:
        return set()
    out = {"c:" + name.core}
    if name.cjk:
        # An abbreviation starts with the full name's first character and ends
        # with one of its others: index each (first, other) pair.
        return out | {"j:" + name.words[0] + ch for ch in name.words[1:]}
    if len(name.words) == 1:
        return out | {"a:" + name.words[0]}
    if name.stated:
        out.add("a:" + name.stated)
    out |= {"a:" + a for a in _acronyms(name.words)}
    # Longer forms and initials keep the first letter and the last word.
    return out | {f"x:{name.words[0][0]}|{name.words[-1]}"}


def _acronyms(words: tuple[str, ...], least: int = 2) -> set[str]:
    """The initials of all words and of those an acronym keeps, ``least`` or more."""
    content = [w for w in words if w not in CONNECTIVES]
    return {"".join(w[0] for w in ws) for ws in (words, content) if len(ws) >= least}


def match(a: Name, b: Name) -> Verdict | None:
    """Whether ``a`` and ``b`` are one entity: ``(SAME, why)``, ``(MAYBE, why)``
    or ``None``. Symmetric."""
    if a.key == b.key or not a.words or not b.words or a.cjk != b.cjk:
        return None
    if _part(a.qualifier) or _part(b.qualifier):
        return None
    if not any(ch.isalpha() for ch in a.core + b.core):
        return None  # "9" and "9%", "$10" and "10": numbers are not names
    if a.core == b.core:
        if a.qualifier == b.qualifier:
            return SAME, "same name"
        # "John Temple (diplomat)" is John Temple; "Iron Maiden (album)" is not the band.
        return MAYBE, "qualifier"
    if a.qualifier and b.qualifier and a.qualifier != b.qualifier:
        return None
    if (a.stated and (a.stated,) == b.words) or (b.stated and (b.stated,) == a.words):
        return SAME, "stated acronym"
    short, long = sorted((a, b), key=lambda n: (len(n.words), n.key))
    return _cjk(short, long) if a.cjk else _latin(short, long)


def _latin(short: Name, long: Name) -> Verdict | None:
    if len(short.words) == 1:
        # "NBA": the league, or the National Bank of Austria; "S.A.": South
        # America, or a legal form. Only the model check links an acronym.
        word = short.words[0]
        if word in long.words or word not in _acronyms(long.words):
            return None
        return (MAYBE, "acronym") if short.dotted or len(word) >= 3 else None
    if _initials(short.words, long.words):
        return SAME, "initials"
    if _longer_form(short.words, long.words):
        return MAYBE, "longer form"
    return None


def _initials(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    """"F. S. Ellis" of "Frederick S. Ellis", "George Bush" of "George W.
    Bush": the same last word, the short form's words in order, each the long
    form's word or its initial, the first ones aligned; and what the long form
    adds is initials only."""
    if short[-1] != long[-1] or not _fits(short[0], long[0]):
        return False
    i = 1
    for word in long[1:-1]:
        if i < len(short) - 1 and _fits(short[i], word):
            i += 1
        elif not (len(word) == 1 and word.isalpha()):
            return False
    return i == len(short) - 1


def _fits(word: str, full: str) -> bool:
    """The same word, or one the other's initial ("j" of "johann"; not "x" of "xxiii", nor "2" of "26")."""
    if word == full:
        return True
    initial, whole = (word, full) if len(word) == 1 else (full, word)
    return len(initial) == 1 and initial.isalpha() and whole.startswith(initial) and not _ROMAN.match(whole)


def _longer_form(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    """The same first and last words, the short form's words in order, and
    no number added ("April 1, 2005" is not "April 2005", nor "Ramesses II
    III" "Ramesses III")."""
    if short[0] != long[0] or short[-1] != long[-1]:
        return False
    rest = iter(long)
    if not all(w in rest for w in short):
        return False
    added = list(long)
    for w in short:
        added.remove(w)
    return not any(any(ch.isdigit() for ch in w) or _ROMAN.match(w) for w in added)


def _part(qualifier: str) -> bool:
    return bool(qualifier) and qualifier.split()[0] in PARTS


def _cjk(short: Name, long: Name) -> Verdict | None:
    s, full = short.words, long.words
    if len(s) < 2 or s[0] != full[0]:
        return None
    if full[: len(s)] == s:
        # 清华 of 清华大学, not 北京 of 北京大学: a place's name is its own entity.
        rest = "".join(full[len(s):])
        return (SAME, "short name") if rest in CJK_KINDS and not _place(short.core) else None
    # 北大 of 北京大学: a few characters, in order; not 北京大学 of 北京师范大学.
    if len(s) > 3 or len(full) < len(s) + 2:
        return None
    rest_chars = iter(full[1:])
    return (SAME, "abbreviation") if all(ch in rest_chars for ch in s[1:]) else None


def _place(word: str) -> bool:
    from ragkit.words import jieba_posseg  # jieba's dictionary: loaded on the first Chinese short name

    return any(p.flag == "ns" for p in jieba_posseg().cut(word))
