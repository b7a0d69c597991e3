"""What every store shares: configuration, capabilities and a lifecycle.

Lifecycle::

    store = SomeStore(StoreConfig(namespace="chunks", workspace="w1", ...))
    await store.open()      # connect, create tables/collections, load files
    ...reads and writes...
    await store.flush()     # make every write so far durable (commit)
    await store.close()     # flush, then release connections; reopen with open()

``async with store:`` does open/close. Using a store that is not open raises
``StoreClosedError``. ``drop()`` deletes everything in this store's workspace and
namespace (and nothing else) and leaves the store open and empty.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit.errors import ConfigError, StoreClosedError, describe_validation_error

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")


class Capability(str, Enum):
    """Optional behaviour an adapter declares; the contract suite and the
    pipeline ask for these instead of guessing from the adapter's type."""

    PERSISTENT = "persistent"
    """Data survives close() and a new instance's open() on the same config."""
    METADATA_FILTER = "metadata_filter"
    """Vector queries honour ``filter=``."""
    TRANSACTIONAL = "transactional"
    """Each batch write is all-or-nothing."""
    APPROXIMATE_SEARCH = "approximate_search"
    """Vector search may miss true neighbours (recall checked with a tolerance)."""
    CONCURRENT_WRITES = "concurrent_writes"
    """Writes from many tasks of one event loop interleave without lost updates."""
    STREAMING = "streaming"
    """An LLM's ``stream()`` yields pieces as they arrive."""
    JSON_MODE = "json_mode"
    """An LLM honours ``ChatRequest.json_mode``."""
    DETERMINISTIC = "deterministic"
    """A model returns the same output for the same input, every call."""


class NoOptions(BaseModel):
    """Options model for adapters that take none: anything given is an error."""

    model_config = ConfigDict(extra="forbid")


class StoreConfig(BaseModel):
    """What the core hands a store: where it lives and the adapter's options.

    ``options`` is the raw ``[kind.options]`` table from settings; the adapter
    validates it with its own ``Options`` model.
    """

    model_config = ConfigDict(extra="forbid")

    namespace: str
    workspace: str = "default"
    working_dir: Path = Path("./ragkit_data")
    options: dict[str, Any] = Field(default_factory=dict)
    dimension: int | None = Field(default=None, ge=1)
    """Fixed vector length; required by vector stores, ignored by the others."""

    @field_validator("namespace", "workspace")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):  # match() lets '$' accept a trailing newline
            raise ValueError(
                f"{value!r} is not a valid name: use 1-64 letters, digits, '_' or '-', "
                "starting with a letter or digit"
            )
        return value


class BaseStore:
    """Shared plumbing for every store kind; adapters subclass a kind's ABC."""

    name: ClassVar[str] = ""
    """Registered name, e.g. ``"sqlite"``."""
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        try:
            self.options = self.Options.model_validate(config.options)
        except Exception as exc:  # pydantic's message lists every bad field
            raise ConfigError(
                f"invalid options for {type(self).__name__} "
                f"(namespace {config.namespace!r}): {describe_validation_error(exc)}"
            ) from exc
        self._open = False

    @property
    def namespace(self) -> str:
        return self.config.namespace

    @property
    def workspace(self) -> str:
        return self.config.workspace

    @property
    def is_open(self) -> bool:
        return self._open

    def _check_open(self) -> None:
        if not self._open:
            raise StoreClosedError(
                f"{type(self).__name__} {self.workspace}/{self.namespace} is not open: "
                "call `await store.open()` (or use `async with store:`) first"
            )

    async def open(self) -> None:
        self._open = True

    async def flush(self) -> None:
        """Make every write so far durable. A no-op for stores that commit each write."""

    async def close(self) -> None:
        if self._open:
            await self.flush()
        self._open = False

    async def __aenter__(self):
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(workspace={self.workspace!r}, namespace={self.namespace!r})"
