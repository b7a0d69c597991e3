"""Plugin registry: built-ins through the public hooks, failures recorded, names resolved."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from ragkit.errors import AdapterNotFoundError, DuplicateAdapterError, PluginLoadError
from ragkit.plugins import KINDS, create_model, create_store, get_registry, hookimpl
from ragkit.protocols import KVStore, StoreConfig
from ragkit.storage import SQLiteKVStore
from ragkit.testing import HashEmbedder
from ragkit.testing.registry import registry_with


def fake_plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, fn in hooks.items():
        setattr(module, hook_name, hookimpl(fn))
    return module



def test_every_kind_has_a_builtin_adapter():
    registry = get_registry()
    for kind in KINDS:
        builtin = [a for a in registry.adapters(kind) if a.distribution == "ragkit"]
        assert builtin, f"no built-in {kind} adapter"


def test_get_unknown_name_lists_installed():
    with pytest.raises(AdapterNotFoundError, match="Installed: .*sqlite"):
        get_registry().get("kv", "postgres-typo")


def test_import_path_and_class_and_instance(tmp_path):
    registry = get_registry()
    assert registry.get("kv", "ragkit.storage.sqlite_kv:SQLiteKVStore") is SQLiteKVStore
    config = StoreConfig(namespace="n", working_dir=tmp_path)
    assert isinstance(create_store("kv", SQLiteKVStore, config), SQLiteKVStore)
    instance = SQLiteKVStore(config)
    assert create_store("kv", instance, config) is instance
    embedder = create_model("embedder", "hash", {"dimension": 8})
    assert isinstance(embedder, HashEmbedder) and embedder.dimension == 8


def test_bad_import_path_is_clear():
    with pytest.raises(AdapterNotFoundError, match="cannot import"):
        get_registry().get("kv", "nowhere.module:Thing")


def test_duplicate_names_name_both_providers():
    class OtherKV(SQLiteKVStore):
        name = "sqlite"

    registry = registry_with(fake_plugin("dup", register_kv_stores=lambda register: register(OtherKV)))
    with pytest.raises(DuplicateAdapterError, match=r"'sqlite'.*ragkit 0\.1\.0.*dist-dup 1\.0"):
        registry.get("kv", "sqlite")
    assert registry.get("vector", "numpy")  # other names still resolve
    with pytest.raises(PluginLoadError, match="more than one plugin"):
        registry.raise_for_errors()


def test_misspelled_hook_is_recorded_not_ignored():
    module = types.ModuleType("typo")
    module.register_kv_store = hookimpl(lambda register: None)  # singular: no such hook
    registry = registry_with(module)
    record = next(r for r in registry.plugins if r.name == "typo")
    assert record.status == "error" and "register_kv_store" in record.error


def test_hook_that_raises_is_recorded_and_others_still_register():
    def boom(register):
        raise RuntimeError("cannot connect at import")

    registry = registry_with(fake_plugin("boom", register_graph_stores=boom))
    record = next(r for r in registry.plugins if r.name == "boom")
    assert "cannot connect at import" in record.error
    assert "networkx" in registry.names("graph")


def test_registered_class_is_a_real_store():
    assert issubclass(get_registry().get("kv", "sqlite"), KVStore)


HEAVY_CLIENTS = ("qdrant_client", "chromadb", "neo4j", "redis", "openai", "ollama", "torch", "sentence_transformers")


def test_loading_every_installed_plugin_imports_no_client_library():
    """Listing adapters must stay cheap: every ``RAG(...)`` and CLI command
    loads the registry, and importing a client library (qdrant_client alone
    took ~0.7 s) would be paid by users who never pick that backend."""
    code = (
        "import sys\n"
        "from ragkit.plugins import get_registry\n"
        "r = get_registry()\n"
        "print(len([p for p in r.plugins if p.status == 'ok']), [p.name for p in r.plugins if p.status != 'ok'])\n"
        f"print(sorted(m for m in {HEAVY_CLIENTS!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded, heavy = out.stdout.splitlines()
    assert loaded.split(" ", 1)[1] == "[]", f"plugins failed to load: {loaded}"
    assert int(loaded.split(" ", 1)[0]) >= 9  # the built-ins and the 8 first-party plugins
    assert heavy == "[]", f"registry loading imported {heavy}"
