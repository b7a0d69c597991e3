"""Plain text: the extensions read as text, and how their bytes become a
``str``. The load stage (``ragkit.pipeline.load``) reads text files with it,
and so do the loaders that hold text (``tabular``) and ``load_bytes`` for a
file no loader claims.

Rules: a byte order mark picks UTF-8, UTF-16 or UTF-32 and is removed; other
files are read as UTF-8, with invalid bytes replaced by U+FFFD and counted.
Newlines become ``\\n`` (``\\r\\n`` and lone ``\\r``). Nothing else is altered.
Bytes that are not text (NUL bytes, mostly control characters, mostly
invalid UTF-8) are named as binary (``Decoded.binary``), not indexed.
"""

from __future__ import annotations

import codecs
import re
import threading
from dataclasses import dataclass

TEXT_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".txt", ".text", ".md", ".markdown", ".mdx", ".rst", ".adoc", ".org", ".tex",
        ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".toml",
        ".html", ".htm", ".xml", ".log",
    }
)

_BOMS: tuple[tuple[bytes, str], ...] = (
    # UTF-32-LE's mark starts with UTF-16-LE's, so it must be tried first.
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# C0 controls other than \t \n \v \f \r and ESC (ANSI colours in logs), plus DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_SAMPLE = 8192
_MAX_CONTROL_RATIO = 0.10
_MAX_REPLACED_RATIO = 0.30

_tally = threading.local()


def _replace_and_count(exc: UnicodeError) -> tuple[str, int]:
    # Same output as errors="replace", but counts the bytes it replaced.
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    _tally.replaced += exc.end - exc.start
    return "\ufffd", exc.end


codecs.register_error("ragkit.replace_count", _replace_and_count)


@dataclass
class Decoded:
    text: str
    encoding: str
    bom: bool
    replaced: int
    binary: str | None = None


def decode(given: bytes | list[bytes]) -> Decoded:
    """Decodes bytes; given in a one-item list, the list is emptied once they are
    decoded, so the caller's bytes are not held while the text is normalised (a
    large file is then at most two copies at a time, not four)."""
    data = given[0] if isinstance(given, list) else given
    encoding, skip, bom = "utf-8", 0, False
    for mark, name in _BOMS:
        if data.startswith(mark):
            encoding, skip, bom = name, len(mark), True
            break
    if not bom and b"\x00" in data:
        # UTF-8 text never contains NUL; rejecting early avoids decoding a large binary.
        return Decoded("", encoding, bom, 0, binary="contains NUL bytes")
    _tally.replaced = 0
    body_size = len(data) - skip
    with memoryview(data) as view:  # no copy of the body after a byte order mark
        text = str(view[skip:], encoding, "ragkit.replace_count")
    replaced = _tally.replaced
    if isinstance(given, list):
        given.clear()
    del data
    sample = text[:_SAMPLE]
    text = normalize_text(text)
    decoded = Decoded(text, encoding, bom, replaced)
    if "\x00" in text:
        decoded.binary = "contains NUL characters"
    elif sample and len(_CONTROL.findall(sample)) > _MAX_CONTROL_RATIO * len(sample):
        decoded.binary = "mostly control characters"
    elif body_size and replaced > _MAX_REPLACED_RATIO * body_size:
        decoded.binary = f"not {encoding.upper()} text ({replaced} of {body_size} bytes invalid)"
    return decoded


def normalize_text(text: str) -> str:
    """Newlines to ``\\n`` and a leading byte order mark removed; nothing else."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")
