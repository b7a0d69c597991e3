"""A private registry for tests: the built-ins plus plugin modules made in memory,
so a test can register hook implementations without installing a distribution."""

from __future__ import annotations

import types

from ragkit.plugins import KINDS, Registry
from ragkit.plugins.registry import PluginRecord


def registry_with(*modules: types.ModuleType) -> Registry:
    """The built-ins (whatever else is installed) plus ``modules`` as plugins,
    each from a distribution named ``dist-<module name>``, version 1.0."""
    registry = Registry()
    registry.load(only=set())
    for module in modules:
        registry._register(PluginRecord(module.__name__, f"dist-{module.__name__}", "1.0", False), lambda m=module: m)
    # Collect again from scratch, so the modules' classes join the built-ins' in one pass.
    registry._adapters = {k: {} for k in KINDS}
    for record in registry.plugins:
        record.adapters.clear()
    registry._collect()
    return registry
