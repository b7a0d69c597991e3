"""Deterministic, content-derived ids.

Ids are derived from content so that re-inserting the same text yields the same
ids on every machine and backend, which is what makes re-inserts no-ops and
makes two backend combinations comparable record by record.
"""

from __future__ import annotations

import hashlib
import unicodedata


_SLICE = 1 << 20


def digest(*parts: str) -> str:
    """Hex MD5 of the parts joined by a separator that cannot occur in text."""
    h = hashlib.md5(usedforsecurity=False)
    for part in parts:
        # A slice at a time: a whole document's UTF-8 copy would be one more
        # copy of a large file's text at the loader's peak (same digest).
        for start in range(0, len(part), _SLICE):
            h.update(part[start:start + _SLICE].encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def normalize_name(name: str) -> str:
    """The name rule that decides when two entity mentions are one entity.

    NFKC folds full-width and compatibility forms (common in CJK text), case is
    folded, quotes and surrounding whitespace are stripped and inner runs of
    whitespace collapse to one space.
    """
    text = unicodedata.normalize("NFKC", name)
    text = text.strip().strip("\"'`").strip()
    return " ".join(text.split()).casefold()


def doc_id(content: str) -> str:
    return "doc-" + digest(content)


def chunk_id(content: str) -> str:
    return "chunk-" + digest(content)


def entity_id(name: str) -> str:
    return "ent-" + digest(normalize_name(name))


def relation_id(source: str, target: str) -> str:
    """Relations are undirected: (a, b) and (b, a) have one id."""
    a, b = sorted((normalize_name(source), normalize_name(target)))
    return "rel-" + digest(a, b)
