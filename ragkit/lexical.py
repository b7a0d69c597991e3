"""Words for lexical (BM25) search: the one rule every store with
``Capability.TEXT_SEARCH`` indexes and queries by.

The store's base class (``KVStore``) turns a record's text into ``terms`` and
a question into ``query_terms``; the adapter only keeps and ranks them. So two
backends find the same records for the same question, whatever full-text
engine each has: they index words, not text.

- Words of alphabetic scripts are case-folded and lightly stemmed ("Leads",
  "led", "leading" -> "lead"); function words ("the", "of", "who") are left
  out. Digits stay: years and numbers are what a question often names.
- Chinese runs are cut by jieba's search mode, which also gives the shorter
  words inside a long one ("苹果公司" -> "苹果", "公司", "苹果公司"), so a
  question naming either finds the text; particles ("的", "是") are left out.
- Every term is a run of letters and digits only (``TERM``): an adapter may
  quote it into its engine's query syntax without escaping anything else.
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from collections import Counter
from functools import lru_cache

from ragkit.words import STOP, ZH_STOP, jieba_posseg, stem

_CJK_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUNS = re.compile(f"(?P<cjk>[{_CJK_RANGES}]+)|(?P<word>[^\\W_{_CJK_RANGES}]+)")
TERM = re.compile(r"[^\W_]+")
"""What every term matches whole."""

MAX_TERM_CHARS = 64
"""Longer runs (hashes, base64) are cut: no backend's index needs whole ones."""

MAX_QUERY_TERMS = 64
"""A question's first 64 distinct terms: past that it is an essay, and each
term is one more posting list to read."""

K1, B = 1.2, 0.75
"""BM25's term-frequency saturation and length normalisation (Robertson's
usual values; Lucene's and SQLite FTS5's defaults)."""

SCORE_DIGITS = 9
"""Scores are rounded to 9 digits before ranking: equal records tie exactly,
whatever order a backend returned their postings in."""


def terms(text: object) -> list[str]:
    """The index terms of ``text``, in order, repeated as often as they occur
    (BM25 counts them); ``[]`` for anything that is not a string."""
    if not isinstance(text, str):
        return []
    out: list[str] = []
    # NFKC: "e" + a combining accent is one letter, full-width "ＡＢ" is "AB".
    for run in _RUNS.finditer(unicodedata.normalize("NFKC", text)):
        if run.group("cjk"):
            out.extend(_chinese(run.group("cjk")))
        else:
            word = _word(run.group("word"))
            if word:
                out.append(word)
    return out


def query_terms(text: str) -> list[str]:
    """A question's distinct terms, in order of first appearance."""
    return list(dict.fromkeys(terms(text)))


def bm25(postings: list[tuple[str, int, dict[str, int]]], population: int, top_k: int) -> list[tuple[str, float]]:
    """The ``top_k`` best ``(key, score)``, best first (ties by key), from the
    postings of the records that hold a question's words: ``(key, its number
    of terms, {word: count})``, among ``population`` records.

    BM25 with Lucene's idf, ``log(1 + (N - n + 0.5) / (n + 0.5))``: positive
    however common the word, so a scope of a few records still ranks (the
    classic idf is negative past half of them). The mean length is the
    matching records' mean, not the whole index's: it is computed from the
    postings alone, so a scoped search (``KVStore.search_text(within=...)``)
    needs nothing from records out of its scope, and scores as an index of its
    records alone would."""
    if not postings or top_k <= 0:
        return []
    population = max(population, len(postings))
    frequency: Counter[str] = Counter()
    for _, _, counts in postings:
        frequency.update(counts.keys())
    weight = {w: math.log(1 + (population - n + 0.5) / (n + 0.5)) * (K1 + 1) for w, n in frequency.items()}
    mean_length = sum(max(length, 1) for _, length, _ in postings) / len(postings)
    flat, per_term = K1 * (1 - B), K1 * B / mean_length
    scored = []
    for key, length, counts in postings:
        norm = flat + per_term * max(length, 1)
        score = 0.0
        for word, tf in counts.items():
            score += weight[word] * tf / (tf + norm)
        scored.append((key, round(score, SCORE_DIGITS)))
    return heapq.nsmallest(top_k, scored, key=lambda ks: (-ks[1], ks[0]))


def _word(word: str) -> str:
    low = word.casefold()
    if low in STOP or (len(low) == 1 and not low.isdigit()):
        return ""
    # Case folding can add a combining mark ("İ" -> "i" + U+0307): kept out,
    # so every term is letters and digits only, as each engine tokenises it.
    return "".join(TERM.findall(stem(low)))[:MAX_TERM_CHARS]


@lru_cache(maxsize=4096)
def _chinese(run: str) -> tuple[str, ...]:
    tokenizer = jieba_posseg().dt.tokenizer  # initialised once, from the dictionary in the package
    words = (w.strip() for w in tokenizer.cut_for_search(run, HMM=True))
    return tuple(w[:MAX_TERM_CHARS] for w in words if w and w not in ZH_STOP and TERM.fullmatch(w))
