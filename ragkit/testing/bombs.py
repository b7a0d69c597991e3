"""Hostile files for the loaders' bounds: zip bombs (one that says how large it
is, one whose zip directory lies, one of too many entries), XML entity bombs
("billion laughs"), an external-entity read (XXE) and a PDF whose stream
inflates past its limit; and ``peak_growth`` to measure what reading one cost.

Each starts from a normal file written by ``ragkit.testing.documents`` and
replaces one part, so everything but the attack is what the format's own
library wrote. The large parts are streamed through zlib: building a bomb of
hundreds of MiB takes about a second and a few MiB of memory.
"""

from __future__ import annotations

import re
import shutil
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MAIN_PART = {
    ".epub": "OEBPS/c0.xhtml",
    ".docx": "word/document.xml",
    ".pptx": "ppt/slides/slide1.xml",
    ".xlsx": "xl/worksheets/sheet1.xml",
}
"""The part of each format that holds the text: where a bomb does harm."""

_CHUNK = 1 << 20


def normal_file(path: Path, text: str = "The Okapi vault lantern is teal.") -> Path:
    """A small, genuine file of the type ``path``'s extension names."""
    from ragkit.testing.documents import write_docx, write_epub, write_pptx, write_xlsx

    page = [("h1", "Vault"), ("p", text)]
    writers: dict[str, Callable[[], Path]] = {
        ".epub": lambda: _deflated(write_epub(path, [page])),
        ".docx": lambda: write_docx(path, [page]),
        ".pptx": lambda: write_pptx(path, [page]),
        ".xlsx": lambda: write_xlsx(path, {"Vault": [["Item", "Fact"], ["lantern", text]]}),
    }
    return writers[path.suffix]()


def _deflated(path: Path) -> Path:
    """The zip rewritten with its entries deflated, as real EPUBs are (but the
    ``mimetype`` entry, which the format wants stored)."""
    with zipfile.ZipFile(path) as zf:
        entries = [(info, zf.read(info)) for info in zf.infolist()]
    with zipfile.ZipFile(path, "w") as zf:
        for info, data in entries:
            info.compress_type = zipfile.ZIP_STORED if info.filename == "mimetype" else zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def replace_part(path: Path, name: str, pieces: Iterator[bytes]) -> Path:
    """Rewrite the zip at ``path`` with part ``name``'s content streamed from
    ``pieces`` (deflated at level 9); the other parts are copied as they are."""
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for info in src.infolist():
            if info.filename != name:
                dst.writestr(info, src.read(info))
                continue
            out = zipfile.ZipInfo(name, date_time=info.date_time)
            out.compress_type = zipfile.ZIP_DEFLATED
            with dst.open(out, "w", force_zip64=True) as fh:  # force_zip64: the size is not known up front
                for piece in pieces:
                    fh.write(piece)
    shutil.move(tmp, path)
    return path


def many_entries(path: Path, count: int = 20_000) -> Path:
    """A genuine file plus ``count`` empty entries: a few MiB, and about half a
    KiB of memory per entry for zipfile to read its directory."""
    normal_file(path)
    with zipfile.ZipFile(path, "a") as zf:
        for n in range(count):
            zf.writestr(f"customXml/item{n}.bin", b"")
    return path


def filler(size: int, byte: bytes = b" ") -> Iterator[bytes]:
    """``size`` bytes of one byte value, a MiB at a time: deflate shrinks it about 1000:1."""
    block = byte * _CHUNK
    while size > 0:
        yield block[: min(size, _CHUNK)]
        size -= _CHUNK


def _padded(prefix: bytes, size: int, suffix: bytes) -> Iterator[bytes]:
    yield prefix
    yield from filler(size)
    yield suffix


def zip_bomb(path: Path, size: int = 300 << 20) -> Path:
    """A genuine file whose text part is padded with ``size`` bytes of spaces
    inside its XML: a few hundred KiB on disk, ``size`` bytes once inflated."""
    normal_file(path)
    name = MAIN_PART[path.suffix]
    with zipfile.ZipFile(path) as zf:
        xml = zf.read(name)
    cut = xml.rindex(b"</")  # before the root's closing tag: whitespace there is still well-formed XML
    return replace_part(path, name, _padded(xml[:cut], size, xml[cut:]))


def lie_about_size(path: Path, claimed: int = 4096) -> Path:
    """Patch the text part of a zip (a ``zip_bomb``) to say, in its local header
    and central directory, that it is ``claimed`` bytes, with the CRC of its
    first ``claimed`` bytes: Python's zipfile then serves those bytes with a
    valid checksum, but ``ZipFile.read`` still inflates the whole stream in one
    call to get them."""
    name = MAIN_PART[path.suffix]
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
        with zf.open(info) as fh:
            crc = zlib.crc32(fh.read(claimed))
        central = zf.start_dir
    data = bytearray(path.read_bytes())
    _patch_sizes(data, info.header_offset, b"PK\x03\x04", 14, name, crc, claimed)
    while True:  # find this part's central directory record
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, central + 28)
        if data[central + 46:central + 46 + name_len] == name.encode():
            break
        central += 46 + name_len + extra_len + comment_len
    _patch_sizes(data, central, b"PK\x01\x02", 16, name, crc, claimed)
    path.write_bytes(bytes(data))
    return path


def _patch_sizes(data: bytearray, at: int, signature: bytes, crc_at: int, name: str, crc: int, claimed: int) -> None:
    """Write CRC and uncompressed size in a local (``crc_at`` 14) or central (16)
    header: in its Zip64 extra field when it has one (zipfile reads them there)."""
    assert data[at:at + 4] == signature, f"no {signature!r} header for {name} at {at}"
    struct.pack_into("<L", data, at + crc_at, crc)
    size_at = at + crc_at + 8
    if struct.unpack_from("<L", data, size_at)[0] != 0xFFFFFFFF:
        struct.pack_into("<L", data, size_at, claimed)
        return
    name_len, extra_len = struct.unpack_from("<HH", data, at + crc_at + 12)
    extra = at + (30 if signature == b"PK\x03\x04" else 46) + name_len
    end = extra + extra_len
    while extra + 4 <= end:
        tag, length = struct.unpack_from("<HH", data, extra)
        if tag == 0x0001:  # Zip64: uncompressed size first
            struct.pack_into("<Q", data, extra + 4, claimed)
            return
        extra += 4 + length
    raise AssertionError(f"{name}: no Zip64 extra field to patch")


BILLION_LAUGHS = (
    b'<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
               for i in range(1, 10))
    + b"]>"
)
"""A DTD whose ``&lol9;`` expands to 10^9 "lol": 3 GB from under 1 KiB."""


def xxe_doctype(target: Path) -> bytes:
    """A DTD whose ``&xxe;`` is the content of the local file ``target``."""
    return b'<!DOCTYPE r [<!ENTITY xxe SYSTEM "' + target.resolve().as_uri().encode() + b'">]>'


def entity_file(path: Path, doctype: bytes, reference: bytes) -> Path:
    """A genuine file whose text part declares ``doctype`` after its XML
    declaration and uses ``reference`` (``b"&lol9;"``) as a paragraph's text."""
    text = "ENTITY-PLACEHOLDER"
    normal_file(path, text)
    name = MAIN_PART[path.suffix]
    with zipfile.ZipFile(path) as zf:
        xml = zf.read(name)
    assert text.encode() in xml, f"{name} lacks the placeholder"
    xml = xml.replace(text.encode(), reference)
    if xml.startswith(b"<?xml"):
        end = xml.index(b"?>") + 2
        xml = xml[:end] + doctype + xml[end:]
    else:
        xml = doctype + xml
    return replace_part(path, name, iter([xml]))


def pdf_bomb(path: Path, size: int = 300 << 20) -> Path:
    """A one-page PDF whose content stream is ``size`` bytes of spaces after a
    line of text, FlateDecode-compressed to a few hundred KiB."""
    compressor = zlib.compressobj(9)
    body = [compressor.compress(b"BT /F1 12 Tf 72 720 Td (The Okapi vault lantern is teal.) Tj ET\n")]
    body += [compressor.compress(piece) for piece in filler(size)]
    body.append(compressor.flush())
    stream = b"".join(body)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body_bytes in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body_bytes + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def status_bytes(field: str, pid: int | str = "self") -> int:
    """A ``kB`` line of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``) in bytes."""
    with open(f"/proc/{pid}/status") as fh:
        match = re.search(rf"^{field}:\s+(\d+) kB", fh.read(), re.M)
    assert match, f"no {field} in /proc/{pid}/status"
    return int(match.group(1)) * 1024


def peak_growth(work: Callable[[], Any]) -> tuple[Any, int]:
    """``work()``'s result and how far this process's peak resident memory rose
    above its resident memory before it. Linux: writing 5 to
    ``/proc/self/clear_refs`` resets the peak (VmHWM), so earlier tests do not
    hide this one's."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    before = status_bytes("VmRSS")
    result = work()
    return result, status_bytes("VmHWM") - before
