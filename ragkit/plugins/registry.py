"""Find adapters and query modes: built-ins and the ``ragkit`` entry-point group,
via pluggy. What can be registered is the table in ``kinds.py``.

Loading is fault-tolerant by design: each entry point is imported on its own,
and one that raises is recorded (shown by ``ragkit plugins``) instead of taking
every command down; so is a class its kind's check refuses (a query mode
without a ``search`` method), while the plugin's other classes still register. ``RAGKIT_STRICT_PLUGINS=1`` turns any such failure into an
error; ``RAGKIT_LOAD_PLUGINS=a,b`` loads only the named entry points (built-ins
always load). The test doubles (``ragkit.testing.plugin``) load in test runs
only (``test_doubles_wanted``), so production lists none of them.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from ragkit.errors import (
    AdapterNotFoundError,
    ConfigError,
    DuplicateAdapterError,
    PluginLoadError,
)
from ragkit.plugins import hookspecs
from ragkit.plugins.kinds import KINDS, MODEL_KINDS, STORE_KINDS, Kind

GROUP = "ragkit"
BUILTIN_PLUGINS = ("ragkit.builtin",)
TEST_DOUBLES_PLUGIN = "ragkit.testing.plugin"


def test_doubles_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a test run, which registers the test doubles too:
    ``RAGKIT_TEST_DOUBLES=1`` (the test suite's conftest sets it), or pytest
    running a test here or in a parent process (``PYTEST_CURRENT_TEST``, which
    a child inherits even when a test strips ``RAGKIT_*`` from its environment)."""
    env = os.environ if env is None else env
    return _env_flag("RAGKIT_TEST_DOUBLES", env) or "PYTEST_CURRENT_TEST" in env


test_doubles_wanted.__test__ = False  # a function, not a test, for pytest


@dataclass
class AdapterInfo:
    """One registered adapter class and where it came from."""

    kind: str
    name: str
    cls: type
    plugin: str
    distribution: str
    version: str
    conflicts: list[AdapterInfo] = field(default_factory=list)
    error: str | None = None
    """Why the class was refused (its kind's check failed); a refused class is listed, never used."""

    @property
    def source(self) -> str:
        return f"{self.distribution} {self.version} (plugin {self.plugin})"


@dataclass
class PluginRecord:
    """One plugin (built-in module or entry point) and how its loading went."""

    name: str
    distribution: str
    version: str
    builtin: bool
    error: str | None = None
    adapters: list[AdapterInfo] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "error" if self.error else "ok"


class Registry:
    """Everything the installed plugins registered, by kind and name."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: list[PluginRecord] = []
        self._adapters: dict[str, dict[str, AdapterInfo]] = {k: {} for k in KINDS}

    # -- loading -------------------------------------------------------------

    def load(self, *, strict: bool | None = None, only: set[str] | None = None) -> Registry:
        strict = _env_flag("RAGKIT_STRICT_PLUGINS") if strict is None else strict
        if only is None and os.environ.get("RAGKIT_LOAD_PLUGINS") is not None:
            only = {p.strip() for p in os.environ["RAGKIT_LOAD_PLUGINS"].split(",") if p.strip()}
        import ragkit

        for modname in BUILTIN_PLUGINS + ((TEST_DOUBLES_PLUGIN,) if test_doubles_wanted() else ()):
            record = PluginRecord(modname, "ragkit", ragkit.__version__, builtin=True)
            self._register(record, lambda m=modname: importlib.import_module(m))
        for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
            if only is not None and ep.name not in only:
                continue
            dist = ep.dist
            record = PluginRecord(
                ep.name,
                dist.metadata["Name"] if dist else "?",
                dist.version if dist else "?",
                builtin=False,
            )
            self._register(record, ep.load)
        self._collect()
        if strict:
            self.raise_for_errors()
        return self

    def _register(self, record: PluginRecord, loader: Callable[[], Any]) -> None:
        self.plugins.append(record)
        try:
            module = loader()
            self.pm.register(module, name=record.name)
            # A misspelled hook name would otherwise be silently ignored.
            self.pm.check_pending()
        except Exception as exc:  # any import-time failure is the plugin's, not ours
            record.error = f"{type(exc).__name__}: {exc}"
            plugin = self.pm.get_plugin(record.name)
            if plugin is not None:
                self.pm.unregister(plugin)

    def _collect(self) -> None:
        by_name = {r.name: r for r in self.plugins}
        for kind in KINDS.values():
            hook = getattr(self.pm.hook, kind.hook)
            for impl in hook.get_hookimpls():  # registration order
                record = by_name[impl.plugin_name]
                try:
                    impl.function(register=self._register_callback(kind, record))
                except Exception as exc:
                    problem = f"{kind.hook} raised {type(exc).__name__}: {exc}"
                    record.error = f"{record.error}; {problem}" if record.error else problem

    def _register_callback(self, kind: Kind, record: PluginRecord) -> Callable[..., None]:
        def register(cls: type, name: str | None = None) -> None:
            adapter_name = name or getattr(cls, "name", "") or cls.__name__
            info = AdapterInfo(
                kind.name, adapter_name, cls, record.name, record.distribution, record.version
            )
            record.adapters.append(info)
            # A refused class is recorded, not raised: the plugin's other classes still register.
            info.error = _refusal(kind, cls, adapter_name)
            if info.error is not None:
                return
            existing = self._adapters[kind.name].get(adapter_name)
            if existing is not None:
                existing.conflicts.append(info)
            else:
                self._adapters[kind.name][adapter_name] = info

        return register

    def raise_for_errors(self) -> None:
        problems = [f"plugin {r.name!r} ({r.distribution}): {r.error}" for r in self.plugins if r.error]
        problems += [f"plugin {i.plugin!r} ({i.distribution}): {i.kind} {i.name!r} refused: {i.error}"
                     for i in self.refused()]
        problems += [str(_duplicate_error(i)) for i in self.all_adapters() if i.conflicts]
        if problems:
            raise PluginLoadError(
                "RAGKIT_STRICT_PLUGINS=1 and some plugins failed:\n  " + "\n  ".join(problems)
            )

    # -- lookup --------------------------------------------------------------

    def all_adapters(self) -> list[AdapterInfo]:
        return [info for kind in KINDS for info in self._adapters[kind].values()]

    def refused(self, kind: str | None = None) -> list[AdapterInfo]:
        """Classes registered but refused by their kind's check, in loading order."""
        return [i for r in self.plugins for i in r.adapters if i.error and kind in (None, i.kind)]

    def owner(self, info: AdapterInfo) -> AdapterInfo | None:
        """The entry that holds ``info``'s name (``info`` itself, or the first of a
        conflict); ``None`` for a refused class."""
        return None if info.error else self._adapters[info.kind].get(info.name)

    def adapters(self, kind: str) -> list[AdapterInfo]:
        return list(self._check_kind(kind).values())

    def names(self, kind: str) -> list[str]:
        return sorted(self._check_kind(kind))

    def get(self, kind: str, spec: str) -> type:
        """The class for a registered name or an import path ``pkg.mod:Class``."""
        adapters = self._check_kind(kind)
        if ":" in spec:
            cls = _import_path(spec)
            problem = _refusal(KINDS[kind], cls, getattr(cls, "name", "") or spec)
            if problem:
                raise ConfigError(f"{spec!r}: {problem}")
            return cls
        info = adapters.get(spec)
        if info is None:
            raise AdapterNotFoundError(self._not_found(kind, spec))
        if info.conflicts:
            raise _duplicate_error(info)
        return info.cls

    def _check_kind(self, kind: str) -> dict[str, AdapterInfo]:
        if kind not in self._adapters:
            raise ConfigError(f"unknown adapter kind {kind!r}; kinds are {', '.join(KINDS)}")
        return self._adapters[kind]

    def _not_found(self, kind: str, spec: str) -> str:
        installed = ", ".join(self.names(kind)) or "none"
        message = (
            f"no {KINDS[kind].label} named {spec!r}. Installed: {installed}. Install a plugin that "
            f"registers it (hook {KINDS[kind].hook}), or use an import path 'package.module:Class'"
        )
        refused = [f"{i.source}: {i.error}" for i in self.refused(kind) if i.name == spec]
        if refused:
            message += f". A class of that name was refused: {'; '.join(refused)}"
        return message + self._failed_hint()

    def _failed_hint(self) -> str:
        failed = [r.name for r in self.plugins if r.error]
        if not failed:
            return ""
        return f" (plugins that failed to load: {', '.join(failed)}; see `ragkit plugins`)"


def _duplicate_error(info: AdapterInfo) -> DuplicateAdapterError:
    sources = "; ".join(i.source for i in [info, *info.conflicts])
    return DuplicateAdapterError(
        f"{info.kind} adapter name {info.name!r} is registered by more than one plugin: "
        f"{sources}. Uninstall one, or narrow loading with RAGKIT_LOAD_PLUGINS"
    )


def _refusal(kind: Kind, cls: Any, name: str) -> str | None:
    """Why a class cannot serve as a ``kind`` (its kind's own check), or ``None``."""
    if kind.check is None:
        return None
    try:
        return _import_path(kind.check)(cls, name)
    except Exception as exc:  # a check that breaks on an odd class refuses it, loudly
        return f"checking {name!r} raised {type(exc).__name__}: {exc}"


def _import_path(spec: str) -> type:
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise AdapterNotFoundError(
            f"cannot import {spec!r}: {exc}. Use 'package.module:Class' with the package installed"
        ) from exc
    return obj


def _env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get(name, "").strip().lower() in {"1", "true", "yes", "on"}


_registry: Registry | None = None


def get_registry(*, reload: bool = False) -> Registry:
    """The process-wide registry, loaded on first use."""
    global _registry
    if _registry is None or reload:
        _registry = Registry().load()
    return _registry


def create_store(kind: str, spec: Any, config: Any, registry: Registry | None = None) -> Any:
    """A store from a registered name, an import path, a class, or an instance
    (returned as is: the caller configured it)."""
    if kind not in STORE_KINDS:
        raise ConfigError(f"{kind!r} is not a store kind ({', '.join(STORE_KINDS)})")
    if isinstance(spec, str):
        spec = (registry or get_registry()).get(kind, spec)
    return spec(config) if isinstance(spec, type) else spec


def create_model(kind: str, spec: Any, options: Any = None, registry: Registry | None = None) -> Any:
    """A model adapter from a registered name, an import path, a class, or an instance."""
    if kind in STORE_KINDS:
        raise ConfigError(f"{kind!r} is a store kind; use create_store")
    if kind not in MODEL_KINDS:
        raise ConfigError(f"{kind!r} is not a model kind ({', '.join(MODEL_KINDS)})")
    if isinstance(spec, str):
        spec = (registry or get_registry()).get(kind, spec)
    return spec(options or {}) if isinstance(spec, type) else spec
