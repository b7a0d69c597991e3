"""Plugin discovery. Third parties implement the hooks in ``hookspecs`` and
expose their module in the ``ragkit`` entry-point group."""

from ragkit.plugins.hookspecs import hookimpl
from ragkit.plugins.kinds import KINDS, MODEL_KINDS, SECTION_KINDS, STORE_KINDS, Kind
from ragkit.plugins.registry import (
    AdapterInfo,
    PluginRecord,
    Registry,
    create_model,
    create_store,
    get_registry,
)

__all__ = [
    "KINDS",
    "MODEL_KINDS",
    "SECTION_KINDS",
    "STORE_KINDS",
    "AdapterInfo",
    "Kind",
    "PluginRecord",
    "Registry",
    "create_model",
    "create_store",
    "get_registry",
    "hookimpl",
]
