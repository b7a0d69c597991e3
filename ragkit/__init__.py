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
    DuplicateAdapterError,
    InvalidTransitionError,
    InvalidValueError,
    PluginLoadError,
    RagkitError,
    StoreClosedError,
)

__all__ = [
    "__version__",
    "AdapterNotFoundError",
    "ConfigError",
    "DimensionMismatchError",
    "DuplicateAdapterError",
    "InvalidTransitionError",
    "InvalidValueError",
    "PluginLoadError",
    "RagkitError",
    "StoreClosedError",
]
