"""Zip-based files (EPUB, DOCX, PPTX, XLSX) opened within the ``[loaders]`` bounds.

Where each attack is stopped:

- **Size claims.** A zip's central directory states every entry's sizes. They
  are checked before anything is inflated: the number of entries, each
  entry's size and compression ratio, and their total (``LoaderLimits``).
- **False claims.** Those sizes are only claims. Python's zipfile stops an
  entry at its stated size, but ``ZipFile.read`` inflates the whole compressed
  stream in one call before cutting it: an entry that says 4 KiB and holds
  300 MiB costs 300 MiB. So entries are inflated here from their compressed
  bytes, a MiB at a time, and refused the moment they pass their stated size.
  EPUB reads its entries through this stream (``SafeZip.read``); python-docx,
  python-pptx and openpyxl open the zip themselves, so their loaders stream
  every entry through it first (``SafeZip.verify``): after that no read of
  theirs can inflate past the sizes checked above.
- **XML entities.** An XML part that declares entities (``<!ENTITY``) is
  refused: entity expansion ("billion laughs", quadratic blowup) and external
  entities (reading a local file or a URL into the text) both need one, and
  EPUB and Office documents never do. The libraries are closed too (a second
  line, for parts not named like XML): python-docx and python-pptx parse with
  lxml's ``resolve_entities=False``, libxml2 caps entity amplification, and
  openpyxl uses defusedxml, which forbids entity declarations, once it is
  installed (the ``documents`` extra installs it; the XLSX loader requires it).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator

from ragkit.loaders.base import LoaderError
from ragkit.loaders.limits import LoaderLimits, over, size

_CHUNK = 1 << 20
_LOCAL_HEADER = struct.Struct("<4s22xHH")
"""A local file header's signature, then (after 22 bytes) its name and extra field lengths."""
_CENTRAL_RECORD = b"PK\x01\x02"
# UTF-8 covers ASCII-compatible encodings; OOXML and EPUB allow only UTF-8 and UTF-16 besides.
_ENTITY = tuple("<!ENTITY".encode(e) for e in ("utf-8", "utf-16-le", "utf-16-be"))
_OVERLAP = max(map(len, _ENTITY)) - 1


def entry_bound(data: bytes) -> int:
    """At most how many entries zipfile would read from ``data``: each record
    of a central directory starts with its signature, and a count of those is
    fast; the directory's own entry count may lie, and zipfile ignores it."""
    return data.count(_CENTRAL_RECORD)


class SafeZip:
    """One zip checked against ``limits`` on opening; entries are read through
    a stream that stops at their stated size and the limits."""

    def __init__(self, data: bytes, limits: LoaderLimits) -> None:
        self.data, self.limits = data, limits
        self.inflated = 0
        # Before zipfile reads the directory: each entry costs it about 0.5 KiB of memory.
        if entry_bound(data) > limits.max_entries:
            raise LoaderError(over(f"the archive holds more than {limits.max_entries:,} files",
                                   f"{limits.max_entries:,} files", "max_entries"))
        self.zip = zipfile.ZipFile(io.BytesIO(data))
        try:
            self._check_directory()
        except LoaderError:
            self.zip.close()
            raise

    def __enter__(self) -> SafeZip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.zip.close()

    def read(self, name: str, *, xml: bool = True) -> bytes:
        """Entry ``name`` inflated within the bounds (``KeyError`` if absent);
        ``xml``: refuse it if it declares entities."""
        return b"".join(self._inflate(self.zip.getinfo(name), xml))

    def verify(self, xml: Callable[[str], bool]) -> None:
        """Inflate every entry within the bounds, keeping nothing: for a library
        that opens the zip itself. ``xml(name)``: whether the entry is parsed as XML."""
        for info in self.zip.infolist():
            for _ in self._inflate(info, xml(info.filename)):
                pass

    # -- the checks ------------------------------------------------------------------

    def _check_directory(self) -> None:
        limits, total = self.limits, 0
        for info in self.zip.infolist():
            name = info.filename
            if info.flag_bits & 0x1:
                raise LoaderError(f"entry {name!r} is encrypted inside the zip, which EPUB and Office files "
                                  "never are: export or save the file again")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise LoaderError(f"entry {name!r} uses zip compression method {info.compress_type}; EPUB and "
                                  "Office files use only deflate: export or save the file again")
            if info.file_size > limits.max_entry_bytes:
                raise LoaderError(over(f"entry {name!r} decompresses to {size(info.file_size)}",
                                       size(limits.max_entry_bytes), "max_entry_bytes"))
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > limits.ratio_grace_bytes and ratio > limits.max_compression_ratio:
                raise LoaderError(over(f"entry {name!r} is compressed {ratio:.0f}:1 "
                                       f"({size(info.compress_size)} to {size(info.file_size)})",
                                       f"{limits.max_compression_ratio:g}:1", "max_compression_ratio"))
            total += info.file_size
        if total > limits.max_decompressed_bytes:
            raise LoaderError(over(f"the file decompresses to {size(total)}",
                                   f"{size(limits.max_decompressed_bytes)} decompressed", "max_decompressed_bytes"))

    def _inflate(self, info: zipfile.ZipInfo, xml: bool) -> Iterator[bytes]:
        produced, tail = 0, b""
        for piece in self._pieces(info):
            produced += len(piece)
            self.inflated += len(piece)
            if produced > info.file_size:
                raise LoaderError(
                    f"entry {info.filename!r} inflates past the {size(info.file_size)} its zip directory "
                    "states: the archive's sizes are false, which is how a zip bomb gets past size checks; "
                    "the file is not read (if an application wrote it, save it there again)")
            if self.inflated > self.limits.max_decompressed_bytes:  # an entry read twice counts twice
                raise LoaderError(over(f"reading the file inflated more than {size(self.inflated)}",
                                       f"{size(self.limits.max_decompressed_bytes)} decompressed",
                                       "max_decompressed_bytes"))
            if xml:
                tail = _refuse_entities(info.filename, tail + piece)
            yield piece

    def _pieces(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """The entry's bytes a MiB at a time, inflated as zipfile would (raw
        deflate over exactly ``compress_size`` bytes), however many it says."""
        raw = self._compressed(info)
        if info.compress_type == zipfile.ZIP_STORED:
            for start in range(0, len(raw), _CHUNK):
                yield bytes(raw[start:start + _CHUNK])
            return
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            for start in range(0, len(raw), _CHUNK):
                yield inflater.decompress(raw[start:start + _CHUNK], _CHUNK)
                while inflater.unconsumed_tail:
                    yield inflater.decompress(inflater.unconsumed_tail, _CHUNK)
                if inflater.eof:
                    return
            while piece := inflater.decompress(b"", _CHUNK):  # output still held after the last input
                yield piece
        except zlib.error as exc:
            raise zipfile.BadZipFile(f"entry {info.filename!r} does not inflate: {exc}") from None

    def _compressed(self, info: zipfile.ZipInfo) -> memoryview:
        """The entry's compressed bytes, where zipfile reads them: after its local
        header (whose name and extra field may differ in length from the directory's)."""
        try:
            signature, name_length, extra_length = _LOCAL_HEADER.unpack_from(self.data, info.header_offset)
        except struct.error:
            signature = b""
        if signature != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"entry {info.filename!r} has no local header where the directory says")
        start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
        return memoryview(self.data)[start:start + info.compress_size]


def _refuse_entities(name: str, window: bytes) -> bytes:
    """Refuse an entity declaration in ``window``; what to keep for the next
    piece (a declaration may straddle two)."""
    if any(pattern in window for pattern in _ENTITY):
        raise LoaderError(
            f"entry {name!r} declares XML entities (<!ENTITY): the loaders refuse them in every file, as "
            "entity expansion (\"billion laughs\") and external entities (which read local files) are how "
            "XML bombs work, and EPUB and Office documents need none; no setting allows them: save the "
            "file again from the application that made it")
    return window[-_OVERLAP:]
