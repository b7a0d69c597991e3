"""Token counts of context pieces, kept by the query side per tokenizer.

Most of a context's tokens are its chunks and descriptions, and the same ones
come back query after query: each piece is encoded once per tokenizer and its
count kept in an LRU keyed by the piece itself (a lookup hashes the text, which
is several times cheaper than a digest, and compares it on a hit, so no two
texts ever share a count), bounded by the characters it holds. Nothing is
stored with the graph or the indexes (the write side knows nothing of how the
query side renders or which tokenizer counts), so a changed tokenizer or line
format needs no migration: other pieces are simply counted.

A text made of pieces is counted exactly (``TokenCounts.joined``): two
neighbouring pieces are counted apart only where the tokenizer guarantees a
token boundary (``ragkit.core.tokens.splits_between``), otherwise they are
joined and counted together. A tokenizer that guarantees no boundary at all is
counted on the whole text, which is exact and only slower.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence

from ragkit.core.tokens import splits_between
from ragkit.protocols import Tokenizer

MAX_CHARS = 1 << 24
"""Characters of the pieces whose counts are kept, per tokenizer (16M: some
thousands of chunks with the descriptions of their entities and relations)."""

_BY_TOKENIZER: weakref.WeakKeyDictionary[Tokenizer, TokenCounts] = weakref.WeakKeyDictionary()


def kept_for(kept: weakref.WeakKeyDictionary, owner: object, make):
    """``kept[owner]``, made by ``make(owner)`` the first time, for as long as
    the owner lives; an owner that cannot be weakly referenced or hashed gets
    a fresh one (kept for this call only)."""
    try:
        found = kept.get(owner)
        if found is None:
            found = kept[owner] = make(owner)
        return found
    except TypeError:
        return make(owner)


class TokenCounts:
    """Exact token counts by one tokenizer, the most recently used kept."""

    def __init__(self, tokenizer: Tokenizer, max_chars: int = MAX_CHARS) -> None:
        self.tokenizer = tokenizer
        self.max_chars = max_chars
        self.chars = 0
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._splits: dict[tuple[str, str], bool] = {}
        self._lock = threading.Lock()  # queries build their contexts in worker threads
        self.encoded = 0
        """Pieces this cache had to encode (misses): what a warm cache spares."""

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> TokenCounts:
        """The counts kept for this tokenizer object, for as long as it lives
        (a ``RAG`` keeps its tokenizer, so its queries share them)."""
        return kept_for(_BY_TOKENIZER, tokenizer, cls)

    def count(self, text: str) -> int:
        counts = self._counts
        with self._lock:
            found = counts.get(text)
            if found is not None:
                counts.move_to_end(text)
                return found
        if not text:
            return 0
        found = self.tokenizer.count(text)  # outside the lock: other threads count meanwhile
        with self._lock:
            if text not in counts:
                counts[text] = found
                self.encoded += 1
                self.chars += len(text)
            while self.chars > self.max_chars and len(counts) > 1:
                self.chars -= len(counts.popitem(last=False)[0])
        return found

    def splits(self, before: str, after: str) -> bool:
        """``splits_between(tokenizer, before, after)``, asked once per pair."""
        pair = (before, after)
        found = self._splits.get(pair)
        if found is None:
            found = self._splits[pair] = splits_between(self.tokenizer, before, after)
        return found

    def joined(self, pieces: Sequence[str]) -> int:
        """Exactly ``tokenizer.count("".join(pieces))``."""
        return sum(self.count(group) for group in self.groups(pieces))

    def joined_each(self, texts: Sequence[Sequence[str]], sep: str) -> tuple[list[int], int]:
        """The count of each text (given as pieces) and of the texts joined by
        ``sep``, exactly, each group of pieces digested once: the joined count
        re-uses the texts' groups and only re-joins those next to ``sep``."""
        known: dict[int, tuple[str, int]] = {}  # id -> (the text, kept alive so ids stay unique, its count)

        def count(group: str) -> int:
            if id(group) not in known:
                known[id(group)] = (group, self.count(group))
            return known[id(group)][1]

        each_groups = [self.groups(pieces) for pieces in texts]
        each = [sum(count(g) for g in groups) for groups in each_groups]
        flat: list[str] = []
        for i, groups in enumerate(each_groups):
            flat += [sep, *groups] if i else groups
        return each, sum(count(g) for g in self.groups(flat))

    def groups(self, pieces: Sequence[str]) -> list[str]:
        """``pieces`` with every two neighbours that may share a token joined:
        the texts whose counts add up to the count of the whole."""
        out: list[str] = []
        for piece in pieces:
            if not piece:
                continue
            if out and not self.splits(out[-1][-1], piece[0]):
                out[-1] += piece
            else:
                out.append(piece)
        return out
