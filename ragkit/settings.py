"""One typed settings object from defaults, ``ragkit.toml`` and ``RAGKIT_*``.

Precedence: environment > file > defaults. Every value remembers where it came
from, so ``ragkit config`` can show it.

File (``./ragkit.toml``, or ``RAGKIT_CONFIG`` / ``--config``)::

    workspace = "default"
    working_dir = "./ragkit_data"

    [vector]
    name = "numpy"            # a registered name or "package.module:Class"
    [vector.options]          # validated by the adapter's own Options model
    ...

Environment (``__`` separates nesting levels): ``RAGKIT_WORKSPACE``,
``RAGKIT_WORKING_DIR``, ``RAGKIT_<SECTION>`` for a backend's name
(``RAGKIT_GRAPH=neo4j``) and ``RAGKIT_<SECTION>__<OPTION>`` for one option
(``RAGKIT_LLM__API_KEY=...``); ``RAGKIT_INDEX__CHUNK_SIZE=800`` and
``RAGKIT_INDEX__EXTRACT__GLEANING=1`` for the ``[index]`` section, ``RAGKIT_LOCK__TIMEOUT=30``
for ``[lock]``, ``RAGKIT_SERVER__PORT=9700`` for ``[server]``,
``RAGKIT_LOADERS__MAX_DECOMPRESSED_BYTES=...`` for ``[loaders]``. Option and
``[index]`` values that parse as JSON (numbers, booleans, lists) are taken as
such, anything else as a string.

Options named like credentials (``api_key``, ``password``, ``auth_token``) are
held as ``SecretStr``: no repr, dump or log shows them.

Each plain section's model lives under settings and under its reader, so that
loading settings loads no reader: ``[index]`` and ``[server]`` in
``ragkit.sections``, ``[lock]`` in ``ragkit.core.lock``, ``[loaders]`` in
``ragkit.loaders.limits``. Settings are read at the top (``rag.py``,
``backends.py``, the CLI, the server); the pipeline and the query side are
handed the typed sections (``tests/core/test_layers.py``).

Why not pydantic-settings: its ``EnvSettingsSource`` was tried in place of ``_from_env``. It
reads ``RAGKIT_*`` into a nested dict but needs a subclass for a backend's
variables (name and options, not fields) and JSON option values, while the
merge, the sources and the file stay hand-written: 4 more lines than
``_from_env`` and ``load_settings`` 2.4x slower (385 vs 160 us), plus 40+ ms to
import it.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from ragkit.core.lock import LockSettings
from ragkit.errors import ConfigError, describe_validation_error
from ragkit.loaders.limits import LoaderLimits
from ragkit.plugins.kinds import SECTION_KINDS
from ragkit.redact import is_secret, register_secret
from ragkit.sections.index import IndexConfig
from ragkit.sections.mcp import McpSettings
from ragkit.sections.server import ServerSettings

SECTIONS = SECTION_KINDS
"""Backend sections: each names the adapter of one kind (``ragkit.plugins.kinds``)."""
DEFAULT_FILE = "ragkit.toml"
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")
WORKSPACE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
WORKSPACE_RULE = (
    "use 1-64 lowercase letters, digits, '_' or '-', starting with a letter or digit "
    "(lowercase only: 'W1' and 'w1' would be one folder on a case-insensitive filesystem)"
)
_NESTED = ("index", "server", "lock", "loaders", "mcp")
"""Settings that are sections of plain fields, set one value at a time
(``RAGKIT_INDEX__CHUNK_SIZE``, ``RAGKIT_SERVER__PORT``, ``RAGKIT_LOCK__TIMEOUT``,
``RAGKIT_LOADERS__MAX_ENTRIES``)."""


def check_workspace(value: str) -> str:
    """The workspace name rule (a folder under ``working_dir``): no separators, no traversal."""
    if not WORKSPACE_PATTERN.fullmatch(value):  # match() would let '$' accept "\n"
        lower = value.lower()
        hint = f"; use {lower!r} (rename the folder if it holds data)" if WORKSPACE_PATTERN.fullmatch(lower) else ""
        # The name is echoed (the error hides other inputs, which may be secrets; a workspace is not one).
        shown = repr(value) if len(value) <= 80 else repr(value[:77]) + "..."
        raise ValueError(f"{shown} is not a workspace name: {WORKSPACE_RULE}{hint}")
    return value


class BackendSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("options")
    @classmethod
    def _hide_secrets(cls, options: dict[str, Any]) -> dict[str, Any]:
        return _hide(options)

    def adapter_options(self) -> dict[str, Any]:
        """The options with secrets revealed, for the adapter's own Options
        model (which types the credentials it takes as ``SecretStr`` again)."""
        return _reveal(self.options)


def _backend(name: str) -> Any:
    return Field(default_factory=lambda: BackendSettings(name=name))


class Settings(BaseModel):
    """Which adapter serves each kind, and where data lives."""

    model_config = ConfigDict(extra="forbid")

    workspace: str = "default"
    working_dir: Path = Path("ragkit_data")
    kv: BackendSettings = _backend("sqlite")
    vector: BackendSettings = _backend("numpy")
    graph: BackendSettings = _backend("sqlite")
    doc_status: BackendSettings = _backend("sqlite")
    llm: BackendSettings | None = None
    embedder: BackendSettings = _backend("hash")
    reranker: BackendSettings | None = None
    tokenizer: BackendSettings = _backend("tiktoken")
    index: IndexConfig = Field(default_factory=IndexConfig)
    server: ServerSettings = Field(default_factory=ServerSettings)
    lock: LockSettings = Field(default_factory=LockSettings)
    loaders: LoaderLimits = Field(default_factory=LoaderLimits)
    mcp: McpSettings = Field(default_factory=McpSettings)

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: str) -> str:
        return check_workspace(value)

    @field_validator("working_dir")
    @classmethod
    def _working_dir(cls, value: Path) -> Path:
        if "\x00" in str(value):  # the OS would refuse it only later, with a traceback
            raise ValueError("contains a NUL character; no path can hold one")
        return value


class LoadedSettings(BaseModel):
    """Settings plus where each value came from (dotted path -> source)."""

    settings: Settings
    sources: dict[str, str]
    file: Path | None = None

    def masked(self) -> dict[str, Any]:
        return mask_secrets(self.settings.model_dump(mode="json"))


def load_settings(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> LoadedSettings:
    env = os.environ if env is None else env
    data = Settings().model_dump()
    sources = dict.fromkeys(_leaves(data), "default")
    file = _config_path(path, env)
    if file is not None:
        file_data = _read_toml(file)
        data = _merge(data, file_data)
        sources.update(dict.fromkeys(_leaves(file_data), f"file ({file})"))
    env_data = _from_env(env)
    data = _merge(data, env_data)
    sources.update({k: f"env ({_env_name(k)})" for k in _leaves(env_data)})
    # Keep only the most specific source of each value: llm.name, not llm.
    parents = {k[:i] for k in sources for i, c in enumerate(k) if c == "."}
    sources = {k: v for k, v in sources.items() if k not in parents}
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        where = f" in {file}" if file else ""
        raise ConfigError(f"invalid settings{where}: {describe_validation_error(exc)}") from exc
    return LoadedSettings(settings=settings, sources=sources, file=file)


def _config_path(path: Any, env: Mapping[str, str]) -> Path | None:
    explicit = path or env.get("RAGKIT_CONFIG")
    if explicit:
        p = Path(explicit)
        given, fix = ("", "fix the path") if path else (" (from RAGKIT_CONFIG)", "fix it or unset RAGKIT_CONFIG")
        # Anything readable that is not a folder will do: /dev/null (no settings) and pipes too.
        if p.is_dir():
            raise ConfigError(f"settings file {p}{given} is a folder; give the path of a TOML file")
        if not p.exists():
            raise ConfigError(f"settings file {p}{given} does not exist; {fix}")
        return p
    p = Path(DEFAULT_FILE)
    return p if p.is_file() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    unknown = set(data) - set(Settings.model_fields)
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(Settings.model_fields)}"
        )
    # A section given as a bare string is shorthand for its name.
    return {k: {"name": v} if k in SECTIONS and isinstance(v, str) else v for k, v in data.items()}


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """``RAGKIT_A__B__C=v`` as ``{"a": {"b": {"c": v}}}`` for a setting ``a``; a
    backend's variables set its name (``RAGKIT_LLM``) and options (``RAGKIT_LLM__MODEL``)."""
    out: dict[str, Any] = {}
    for key, value in env.items():
        if key[:7].upper() != "RAGKIT_":
            continue
        path = key[7:].lower().split("__")
        if path[0] in SECTIONS and len(path) == 1:
            path.append("name")
        elif path[0] in SECTIONS:
            path.insert(1, "options")
        elif path[0] not in Settings.model_fields or (len(path) > 1) != (path[0] in _NESTED):
            continue  # RAGKIT_CONFIG, RAGKIT_REDIS_URL (tests), ...
        *parents, last = path
        block = out
        for part in parents:
            block = block.setdefault(part, {})
        block[last] = value if len(path) == 1 or last == "name" else _json_value(value)
    return out


def _json_value(value: str) -> Any:
    """Numbers, booleans, lists and null as JSON; anything else as the string."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return value if isinstance(parsed, str) else parsed


def _env_name(dotted: str) -> str:
    """The variable that set a value: ``llm.options.api_key`` -> ``RAGKIT_LLM__API_KEY``."""
    parts = dotted.split(".")
    if parts[0] in SECTIONS:
        parts = [parts[0], *parts[2:]]  # drop "name" / "options"
    return "RAGKIT_" + "__".join(parts).upper()


def _merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            old = base.get(key)
            # Choosing another backend drops the previous backend's options.
            if key in SECTIONS and isinstance(old, dict) and isinstance(value, dict) and value.get("name", old["name"]) != old["name"]:
                old = None
            merged[key] = _merge(old, value)
        return merged
    return override


def _leaves(data: Any, prefix: str = "") -> list[str]:
    if isinstance(data, dict) and data:
        return [leaf for k, v in data.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")] if prefix else []


def _hide(data: Any, name: str = "") -> Any:
    if isinstance(data, dict):
        return {k: _hide(v, k) for k, v in data.items()}
    if isinstance(data, str) and is_secret(name):
        register_secret(data)  # error text quoting it (a server echoing a header) is scrubbed too
        return SecretStr(data)
    return data


def _reveal(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _reveal(v) for k, v in data.items()}
    return data.get_secret_value() if isinstance(data, SecretStr) else data


def mask_secrets(data: Any, name: str = "") -> Any:
    """Replace values of anything named like a key, token or password, and
    passwords inside URLs, with ``****``."""
    if isinstance(data, dict):
        return {k: mask_secrets(v, k) for k, v in data.items()}
    if isinstance(data, list):
        return [mask_secrets(v, name) for v in data]
    if data is not None and is_secret(name):
        return "****"
    if isinstance(data, str):
        return _URL_PASSWORD.sub(r"\1****@", data)
    return data
