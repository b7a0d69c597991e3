"""What a loader is: bytes of one file in, text with its pages and sections out.

A loader is a small class registered like an adapter (hook ``register_loaders``;
the first-party ones are registered by ``ragkit.builtin``). It names the
extensions and media types it reads, may recognise its format from the bytes
(``sniff``, so a PDF named ``.txt`` is still read as a PDF), and turns the bytes
into a ``Loaded``: the text, and for every stretch of it the page (slide, sheet)
and heading path it came from (``Segment``). The pipeline carries those to each
chunk's ``Location`` and to the references of an answer.

A file the loader cannot read raises ``LoaderError`` with the cause and the
fix; the load stage reports it for that file and goes on with the others.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import ClassVar

from ragkit.errors import RagkitError
from ragkit.loaders.limits import LoaderLimits
from ragkit.schema import Document, JSONScalar, PageUnit, Segment

DOCUMENTS_EXTRA = "pip install 'ragkit[documents]'"


class LoaderError(RagkitError):
    """One file cannot be loaded; the message names the cause and the fix."""


class MissingDependency(LoaderError):
    """The loader's library is not installed."""


@dataclass
class Loaded:
    text: str
    segments: list[Segment] = field(default_factory=list)
    unit: PageUnit = "page"
    pages: int | None = None
    """Pages, slides or sheets in the file (``None``: the format has none)."""
    warnings: list[str] = field(default_factory=list)
    """Problems that did not stop the load (pages without text, ...)."""
    loader: str = ""
    """The loader's name (set by the registry and the load stage)."""

    def document(self, file_path: str | None, **metadata: JSONScalar) -> Document:
        """The document to index: id from the text, pages and sections kept."""
        meta: dict[str, JSONScalar] = {"source": "file"}
        if self.loader:
            meta["loader"] = self.loader
        if self.pages is not None:
            meta["pages"] = self.pages
        return Document.from_text(self.text, file_path=file_path, **{**meta, **metadata}).model_copy(
            update={"segments": self.segments, "unit": self.unit})


class TextBuilder:
    """Accumulates a document's text piece by piece, recording each piece's segment.

    Pieces are separated by a blank line, so the chunker's cuts at segment
    boundaries fall between paragraphs."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.segments: list[Segment] = []

    def add(self, text: str, page: int | None = None, section: str | None = None) -> None:
        text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
        if not text:
            return
        if self._parts:
            self._parts.append("\n\n")
            self._length += 2
        last = self.segments[-1] if self.segments else None
        if last is not None and last.page == page and last.section == section:
            # Same page and section: one segment, so no needless cut between paragraphs.
            self.segments[-1] = Segment(start=last.start, end=self._length + len(text), page=page, section=section)
        else:
            self.segments.append(Segment(start=self._length, end=self._length + len(text), page=page, section=section))
        self._parts.append(text)
        self._length += len(text)

    @property
    def empty(self) -> bool:
        return not self._parts

    def text(self) -> str:
        return "".join(self._parts)


class Loader:
    """Subclass it, set ``name``, ``extensions`` and ``media_types``, define
    ``load`` (and ``sniff`` where the format has a signature), and register it::

        @hookimpl
        def register_loaders(register):
            register(MyLoader)
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    extensions: ClassVar[tuple[str, ...]] = ()
    """Lower case, with the dot: ``(".pdf",)``."""
    media_types: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()
    """Modules the loader imports; when one is missing, files of its type fail
    with ``install`` as the fix instead of the CLI failing."""
    install: ClassVar[str] = DOCUMENTS_EXTRA
    limits: LoaderLimits = LoaderLimits()
    """How far a file may inflate (``[loaders]``); the load stage sets the
    configured bounds on the instance it uses. A loader reading a zip opens it
    with ``ragkit.loaders.archive.SafeZip(data, self.limits)``."""

    def sniff(self, data: bytes) -> bool:
        """Whether the bytes are of this loader's format whatever the file is named."""
        return False

    def load(self, data: bytes, name: str) -> Loaded:
        raise NotImplementedError(f"loader {self.name!r} defines no load()")

    # -- for the registry ----------------------------------------------------------

    @classmethod
    def missing(cls) -> list[str]:
        return [m for m in cls.requires if importlib.util.find_spec(m) is None]

    def check_available(self) -> None:
        if missing := self.missing():
            raise MissingDependency(
                f"reading {self.name.upper()} files needs {', '.join(missing)}, which is not installed: "
                f"{self.install}"
            )
