"""The kinds table (ragkit/plugins/kinds.py) is the one list of what plugins can
register: the hook specifications, the settings' backend sections and the
factories agree with it."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.plugins import KINDS, MODEL_KINDS, SECTION_KINDS, STORE_KINDS, create_model, create_store, hookspecs
from ragkit.settings import SECTIONS, BackendSettings, Settings


def test_every_kind_has_its_hook_spec_and_every_spec_a_kind():
    specs = {
        name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, "ragkit_spec")
    }
    assert specs == {kind.hook for kind in KINDS.values()}
    for kind in KINDS.values():  # each spec takes the register callback, as documented
        assert list(inspect.signature(getattr(hookspecs, kind.hook)).parameters) == ["register"]


def test_settings_sections_are_the_section_kinds():
    assert SECTIONS == SECTION_KINDS
    backend_fields = [
        name for name, field in Settings.model_fields.items()
        if BackendSettings in (field.annotation, *getattr(field.annotation, "__args__", ()))
    ]
    assert backend_fields == list(SECTION_KINDS)


def test_store_and_model_factories_follow_the_roles():
    assert set(STORE_KINDS).isdisjoint(MODEL_KINDS)
    assert {k for k, kind in KINDS.items() if kind.role == "pipeline"} == {"chunker", "query_mode", "loader"}
    with pytest.raises(ConfigError, match="is a store kind; use create_store"):
        create_model("kv", "sqlite")
    with pytest.raises(ConfigError, match="'query_mode' is not a model kind"):
        create_model("query_mode", "mix")
    with pytest.raises(ConfigError, match="'llm' is not a store kind"):
        create_store("llm", "offline", None)


def test_messages_name_the_kind():
    assert KINDS["query_mode"].label == "query mode" and KINDS["graph"].label == "graph adapter"


def test_every_hook_is_documented_for_plugin_writers():
    """docs/writing-an-adapter.md's kinds table names every hook a plugin can implement."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "writing-an-adapter.md").read_text(encoding="utf-8")
    missing = [kind.hook for kind in KINDS.values() if f"`{kind.hook}`" not in doc]
    assert not missing, f"add a row for {missing} to the table in section 1 of the doc"
