"""The ``[loaders]`` section of the settings: how far a file may inflate.

A zip-based file (EPUB, DOCX, PPTX, XLSX) is a few hundred KiB on disk and may
claim, or really hold, hundreds of MiB once decompressed (a "zip bomb"); a
loader that inflated it whole would take the process down. These bounds are
checked before anything is decompressed and again while it is
(``ragkit.loaders.archive``); a file over one fails alone, with the limit's
name and how to raise it (``RAGKIT_LOADERS__MAX_DECOMPRESSED_BYTES=...`` or
``[loaders]`` in ``ragkit.toml``).

Plain pydantic, no loader library: ``ragkit.settings`` imports it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MiB = 1 << 20


class LoaderLimits(BaseModel):
    """Defaults fit genuine documents with room to spare: their XML parts
    inflate 3-30 times (measured on files python-docx and openpyxl write: a
    sheet of 200,000 repeated rows 16:1, Word's styles 30:1; only small parts,
    such as a body of empty paragraphs, go past 100:1), their images not at
    all, and the largest are tens of MiB decompressed. A bomb needs hundreds of
    MiB at ratios near deflate's ceiling of about 1000:1."""

    model_config = ConfigDict(extra="forbid")

    max_decompressed_bytes: int = Field(default=256 * MiB, ge=1)
    """All the entries of one file together, decompressed: about five times
    the server's 50 MiB upload limit, and far below what takes a host down."""
    max_entry_bytes: int = Field(default=128 * MiB, ge=1)
    """One entry (an XML part, an image), decompressed: a Word body or a slide
    is parsed whole, and its tree takes several times its size in memory."""
    max_compression_ratio: float = Field(default=200.0, gt=1)
    """Decompressed over compressed size of one entry, checked for entries
    over ``ratio_grace_bytes``: small entries of repeated markup legitimately
    exceed it and are harmless."""
    ratio_grace_bytes: int = Field(default=MiB, ge=0)
    """Entries up to this size, decompressed, are exempt from the ratio."""
    max_entries: int = Field(default=10_000, ge=1)
    """Files inside one zip: a book or a deck has tens to hundreds."""


def size(n: float) -> str:
    """Bytes for a message: ``256 MiB``, ``4.2 GiB``, ``812 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.1f} {unit}"
    return f"{int(n)} bytes"


def over(what: str, limit: str, setting: str) -> str:
    """The message for a file over one bound: what, the limit and its setting, the fix."""
    return (f"{what}, over the loader's limit of {limit} ([loaders] {setting}): genuine documents stay "
            f"well below it, decompression bombs do not; if this file is genuine, raise {setting} "
            f"(RAGKIT_LOADERS__{setting.upper()})")
