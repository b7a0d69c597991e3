"""What an upload may be: the supported file types and the size and count limits.

``supported_types`` is the one place that says which files load: the
extensions of text, Markdown and every loader whose library is installed
(``ragkit.loaders``), so an upload is refused exactly when indexing the saved
file would be.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath, PureWindowsPath

from fastapi import HTTPException, UploadFile

from ragkit.core.text import shown_name
from ragkit.loaders import supported_types as loadable_types
from ragkit.sections.server import ServerSettings

_CHUNK = 1 << 20


def supported_types() -> frozenset[str]:
    return frozenset(t for t in loadable_types() if t.startswith("."))  # the rest are media types


def check_type(filename: str) -> str:
    """The file's own name (no folders), or 415 naming the supported types.
    Kept as others will be shown it: invisible and bidirectional controls as
    ``\\u202e`` escapes (``shown_name``)."""
    name = shown_name(PureWindowsPath(PurePosixPath(filename or "").name).name)
    suffix = PurePosixPath(name).suffix.lower()
    if not name or suffix not in supported_types():
        raise HTTPException(
            415, f"unsupported file type {suffix or '(none)'!r} for {name[:100]!r}; supported: {', '.join(sorted(supported_types()))}"
        )
    return name


def check_count(n: int, limits: ServerSettings) -> None:
    if n == 0:
        raise HTTPException(400, "nothing to index: send at least one file (field `files`) or text")
    if n > limits.max_upload_files:
        raise HTTPException(413, f"{n} items in one request; the limit is {limits.max_upload_files} ([server] max_upload_files)")


async def save(upload: UploadFile, dest, limits: ServerSettings) -> None:
    """Copy the upload to ``dest``, or 413 once it passes ``max_upload_bytes``."""
    size = 0
    with open(dest, "wb") as out:
        while chunk := await upload.read(_CHUNK):
            size += len(chunk)
            if size > limits.max_upload_bytes:
                raise HTTPException(
                    413, f"{upload.filename!r} is over the limit of {limits.max_upload_bytes} bytes ([server] max_upload_bytes)"
                )
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())  # saved before the job is accepted: a crash loses nothing
