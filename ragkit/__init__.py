"""ragkit: graph-RAG on pluggable backends.

The public surface is assembled here; implementation modules are private by
convention (import from ``ragkit`` or ``ragkit.protocols``).
"""

from __future__ import annotations

__version__ = "0.1.0"

from ragkit.errors import (  # noqa: E402
    AdapterNotFoundError,
    ConfigError,
    DimensionMismatchError,
    DocumentNotFoundError,
    DuplicateAdapterError,
    ElementExistsError,
    ElementNotFoundError,
    ExportError,
    ExtractionError,
    GraphEditError,
    InputNotFoundError,
    InvalidTransitionError,
    InvalidValueError,
    MigrateError,
    ModelError,
    PluginLoadError,
    RagkitError,
    StoreClosedError,
    StoreError,
    WorkspaceNotFoundError,
    WriteAccessError,
    WriterLeaseLostError,
    WriterLockTimeoutError,
)

__all__ = [
    "RAG",
    "QueryParam",
    "QueryResult",
    "Document",
    "Settings",
    "__version__",
    "AdapterNotFoundError",
    "ConfigError",
    "DimensionMismatchError",
    "DocumentNotFoundError",
    "DuplicateAdapterError",
    "ElementExistsError",
    "ElementNotFoundError",
    "ExportError",
    "ExtractionError",
    "GraphEditError",
    "InputNotFoundError",
    "InvalidTransitionError",
    "InvalidValueError",
    "MigrateError",
    "ModelError",
    "PluginLoadError",
    "RagkitError",
    "StoreClosedError",
    "StoreError",
    "WorkspaceNotFoundError",
    "WriteAccessError",
    "WriterLeaseLostError",
    "WriterLockTimeoutError",
]

_LAZY = {"RAG": "ragkit.rag", "QueryParam": "ragkit.schema", "QueryResult": "ragkit.schema",
         "Document": "ragkit.schema", "Settings": "ragkit.settings"}


def __getattr__(name: str):
    # Lazy, so that `import ragkit` (and `ragkit --version`) stays fast.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ragkit' has no attribute {name!r}")
