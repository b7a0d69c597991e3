"""How many copies of a large file's text the loader holds at once: each copy
of a 50 MiB text is 50 MiB more of memory.

Not timed: tracemalloc counts the bytes Python allocates, the same on every
machine. Before, a CRLF file's bytes were still held while its decoded text was
normalised (3.0 sizes of the file at the peak), and the id hashed a UTF-8 copy
of the whole text; now the bytes are dropped once decoded and the id is hashed a
slice at a time (2.0 sizes).
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

from ragkit import ids
from ragkit.pipeline.load import load_documents

_MB = 5 * 1024 * 1024


def _peak_while_loading(path: Path) -> tuple[int, str]:
    load_documents([path.with_name("warm.txt")])  # imports and caches out of the count
    tracemalloc.start()
    try:
        report = load_documents([path])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (doc,) = report.documents
    return peak, doc.content


def test_a_large_crlf_file_is_loaded_within_two_and_a_half_copies(tmp_path: Path) -> None:
    (tmp_path / "warm.txt").write_text("warm")
    path = tmp_path / "big.txt"
    line = b"An ASCII line of text that ends the Windows way.\r\n"
    path.write_bytes(line * (_MB // len(line)))
    size = path.stat().st_size

    peak, content = _peak_while_loading(path)

    assert content.count("\n") == _MB // len(line) and "\r" not in content
    assert peak < 2.5 * size, f"loading a {size:,}-byte file peaked at {peak:,} bytes ({peak / size:.1f} copies)"


def test_the_sliced_digest_is_the_digest_of_the_whole_text() -> None:
    text = "東京 and more " * 300_000  # over a slice, non-ASCII across the seams
    whole = hashlib.md5(text.encode() + b"\x1f", usedforsecurity=False).hexdigest()
    assert ids.digest(text) == whole
    assert ids.digest("a", "b") == hashlib.md5(b"a\x1fb\x1f", usedforsecurity=False).hexdigest()
