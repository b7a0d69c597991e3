"""Choosing a loader for a file, and the list of types the loaders read.

Choice: the content first (a loader whose ``sniff`` recognises the bytes, so a
PDF named ``.txt`` is read as a PDF), then the extension. Files no loader
claims are text, read by ``ragkit.loaders.text`` when their extension is one
of its ``TEXT_EXTENSIONS``.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from pydantic import BaseModel

from ragkit.loaders.base import Loaded, Loader, LoaderError
from ragkit.loaders.limits import LoaderLimits
from ragkit.loaders.text import TEXT_EXTENSIONS, decode
from ragkit.schema import Document

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


def refusal(cls: Any, name: str) -> str | None:
    """Why ``cls`` cannot be loader ``name``, or ``None`` (asked at registration,
    so a broken loader plugin is listed with the reason and never used)."""
    what = getattr(cls, "__qualname__", repr(cls))
    if not (isinstance(cls, type) and issubclass(cls, Loader)):
        return f"{what} is not a subclass of ragkit.loaders.Loader"
    if not _NAME.fullmatch(name):
        return f"loader name {name!r}: use 1-64 lower-case letters, digits, '_', '-' or '.'"
    if cls.load is Loader.load:
        return f"{what} defines no load(data, name)"
    if not cls.extensions and cls.sniff is Loader.sniff:
        return f"{what} names no extensions and defines no sniff(data): no file would reach it"
    if any(not (e.startswith(".") and e == e.lower()) for e in cls.extensions):
        return f"{what}.extensions must be lower case with the dot, like '.pdf': got {cls.extensions!r}"
    try:
        inspect.signature(cls).bind()
    except TypeError:
        return f"{what} must be constructible without arguments"
    return None


def loaders(registry: Any = None) -> list[Loader]:
    """Every registered loader, plugins' before first-party ones, so a plugin
    can take over a type (an OCR-capable ``pdf`` loader)."""
    from ragkit.plugins import get_registry

    registry = registry or get_registry()
    infos = sorted(registry.adapters("loader"), key=lambda i: (i.distribution == "ragkit", i.name))
    return [i.cls() for i in infos]


def detect(filename: str, data: bytes, registry: Any = None) -> Loader | None:
    """The loader for a file: by its bytes, else by its extension; ``None`` for text."""
    found = loaders(registry)
    for loader in found:
        try:
            if loader.sniff(data):
                return loader
        except Exception:  # a plugin's broken sniff must not stop the load: its extensions still count
            continue
    suffix = _suffix(filename)
    return next((loader for loader in found if suffix in loader.extensions), None)


def extensions(registry: Any = None) -> frozenset[str]:
    return frozenset(e for loader in loaders(registry) for e in loader.extensions)


class FileType(BaseModel):
    loader: str
    extensions: list[str]
    media_types: list[str]
    description: str
    available: bool
    """``False``: its library is missing (``install`` says how to add it)."""
    install: str = ""


def file_types(registry: Any = None) -> list[FileType]:
    """What each loader reads, for listings and an upload endpoint's checks."""
    return [FileType(loader=loader.name, extensions=list(loader.extensions), media_types=list(loader.media_types),
                     description=loader.description, available=not loader.missing(),
                     install="" if not loader.missing() else loader.install)
            for loader in loaders(registry)]


TEXT_MEDIA_TYPES = ("text/plain", "text/markdown")


def supported_types(registry: Any = None) -> list[str]:
    """Every extension and media type that can be indexed now: the loaders
    whose libraries are installed, plus text and Markdown (``ragkit.loaders.text``)."""
    out = set(TEXT_EXTENSIONS) | set(TEXT_MEDIA_TYPES)
    for t in file_types(registry):
        if t.available:
            out.update(t.extensions)
            out.update(t.media_types)
    return sorted(out)


def load_bytes(data: bytes, filename: str, registry: Any = None, limits: LoaderLimits | None = None) -> Loaded:
    """Read one file's bytes as ``filename`` (whose extension counts): with the
    loader that claims it, else as UTF-8 text. Raises ``LoaderError`` naming the
    cause and the fix (for an upload: answer 415/422 with its message).
    ``limits``: the ``[loaders]`` bounds (default: their defaults)."""
    loader = detect(filename, data, registry)
    if loader is None:
        if _suffix(filename) not in TEXT_EXTENSIONS:
            raise LoaderError(f"unsupported file type {_suffix(filename) or '(no extension)'!r}; "
                              f"supported: {' '.join(t for t in supported_types(registry) if t.startswith('.'))}")
        decoded = decode(data)
        if decoded.binary:
            raise LoaderError(f"binary file: {decoded.binary}")
        return Loaded(decoded.text)
    loader.check_available()
    if limits is not None:
        loader.limits = limits
    loaded = loader.load(data, filename)
    loaded.loader = loader.name
    return loaded


def load_document(data: bytes, filename: str, registry: Any = None, limits: LoaderLimits | None = None,
                  **metadata: Any) -> Document:
    """``load_bytes`` as a ``Document`` to index (``file_path=filename``), with
    its pages and sections; ``metadata`` joins the loader's (``loader``, ``pages``)."""
    loaded = load_bytes(data, filename, registry, limits)
    if not loaded.text.strip():
        raise LoaderError("the file holds no text")
    return loaded.document(filename, **metadata)


def _suffix(filename: str) -> str:
    name = filename.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name.strip(".") else ""
