"""Loaders: files of other types than text (PDF, Word, PowerPoint, Excel, CSV,
HTML, EPUB) to text with pages and sections (``base.py`` says what one is).

For a server or any caller holding a file's bytes: ``supported_types()`` lists
the extensions and media types that can be indexed, ``load_bytes(data,
filename)`` reads one and ``load_document(data, filename)`` makes it a
``Document`` to index, raising ``LoaderError`` with the cause and the fix.
"""

from ragkit.loaders.base import DOCUMENTS_EXTRA, Loaded, Loader, LoaderError, MissingDependency, TextBuilder
from ragkit.loaders.registry import (
    FileType, detect, file_types, load_bytes, load_document, loaders, supported_types,
)

__all__ = [
    "DOCUMENTS_EXTRA", "FileType", "Loaded", "Loader", "LoaderError", "MissingDependency", "TextBuilder",
    "detect", "file_types", "load_bytes", "load_document", "loaders", "supported_types",
]
