"""Text every store keeps unchanged: the one place for the strictest backend's rules.

Model answers are untrusted and reach every store (names become graph keys,
descriptions node properties, the answer itself a cache record). The backends
disagree on what they refuse, so strings are held to the strictest of them:

- lone surrogates (a JSON ``\\ud800`` escape in an API response) cannot be
  encoded as UTF-8, so no store keeps them: replaced with U+FFFD;
- NUL is refused by Neo4j (and PostgreSQL), and the other C0 controls are not
  valid XML (GraphML export): dropped, except tab, line feed and carriage return;
- an entity name is at most ``MAX_NAME_CHARS`` long, as written and once
  normalised into its key (NFKC can multiply the length: U+FDFA is 18 characters).

``clean`` repairs; ``text_problem``, ``name_problem`` and ``record_problem`` say
why a value still cannot be stored (``None`` when it can), for the caller to
fail one document with that cause.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ragkit.ids import normalize_name

MAX_NAME_CHARS = 500
"""Longest entity name, as written and as its normalised key."""

_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def clean(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD and C0 controls other
    than tab, line feed and carriage return removed."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # Through UTF-16 so a pair split in two code points is joined again
            # and only a lone half becomes U+FFFD.
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return _CONTROLS.sub("", text)


_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
"""Bidirectional overrides and isolates, marks and zero-width characters: in a
name, they make ``gpj.exe`` show as ``exe.jpg``, or two names look the same."""


_LINE_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
"""Control characters: a newline in a file name would split a report line."""


def shown_name(name: str) -> str:
    """A name (a file's, a path) as it may be shown to someone who did not
    choose it, on one line: control characters as ``\\x0a`` escapes (as a
    name that is not UTF-8 shows its bytes), every invisible or bidirectional
    control as a ``\\u202e`` escape."""
    name = _LINE_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", name)
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", name)


def text_problem(text: str) -> str | None:
    """Why no store could keep ``text`` unchanged, or ``None``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "it holds a lone surrogate (not valid Unicode)"
    found = _CONTROLS.search(text)
    if found:
        return f"it holds the control character {found.group()!r}"
    return None


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an entity name, or ``None`` (emptiness is the caller's rule)."""
    if max(len(name), len(normalize_name(name))) > MAX_NAME_CHARS:
        return f"name longer than {MAX_NAME_CHARS} characters (as written or normalised)"
    return text_problem(name)


def record_problem(value: Any, where: str = "value") -> str | None:
    """The first thing in a JSON-like record no store could keep, named by its
    path (``where['key'][2]``), or ``None``."""
    if isinstance(value, str):
        problem = text_problem(value)
        return f"{where}: {problem}" if problem else None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value} is not a finite number"
    if isinstance(value, Mapping):
        for key, item in value.items():
            problem = record_problem(key, f"{where} key {key!r}") or record_problem(item, f"{where}[{key!r}]")
            if problem:
                return problem
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problem = record_problem(item, f"{where}[{i}]")
            if problem:
                return problem
    return None
