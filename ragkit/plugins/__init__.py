"""Plugin discovery. Third parties implement the hooks in ``hookspecs`` and
expose their module in the ``ragkit`` entry-point group."""

from ragkit.plugins.hookspecs import hookimpl
from ragkit.plugins.registry import (
    KINDS,
    STORE_KINDS,
    AdapterInfo,
    PluginRecord,
    Registry,
    create_model,
    create_store,
    get_registry,
)

__all__ = [
    "KINDS",
    "STORE_KINDS",
    "AdapterInfo",
    "PluginRecord",
    "Registry",
    "create_model",
    "create_store",
    "get_registry",
    "hookimpl",
]
