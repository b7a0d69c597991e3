"""``MemoryKVStore``: a pure-Python, in-memory implementation of ``KVStore``.

Everything a real adapter needs is here, in miniature:

- a registered ``name`` (what users put in ``ragkit.toml``: ``[kv] name = "example-memory"``);
- its own ``Options`` model (pydantic, ``extra="forbid"`` so that a typo in
  ``[kv.options]`` is an error instead of being ignored);
- an honest ``capabilities`` declaration, which tells the contract suite what to test;
- the hooks: ``KVStore``'s public methods check that the store is open and
  validate and encode every record before calling them, so each hook only
  moves data (``_upsert`` gets key -> JSON text, ``_get_many`` hands it back).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ragkit.errors import InvalidValueError
from ragkit.protocols import Capability, KVStore, StoreConfig


class MemoryKVOptions(BaseModel):
    """``[kv.options]`` accepted by ``example-memory``."""

    model_config = ConfigDict(extra="forbid")

    max_value_bytes: int | None = Field(default=None, ge=1)
    """Reject records whose JSON encoding is larger than this (no limit by default)."""


Space = dict[str, str]  # key -> the record's JSON text


class MemoryKVStore(KVStore):
    """Records held as JSON text in a process-wide dict.

    Instances with the same working_dir, workspace and namespace share one
    space (like two connections to one database); any other combination is
    isolated. Nothing is written to disk, so the store does not declare
    ``PERSISTENT``: data lives as long as the process. All mutations happen
    without an ``await`` in between, so concurrent writers on one event loop
    cannot lose updates: hence ``CONCURRENT_WRITES``.
    """

    name: ClassVar[str] = "example-memory"
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.CONCURRENT_WRITES})
    Options: ClassVar[type[BaseModel]] = MemoryKVOptions

    _spaces: ClassVar[dict[tuple[str, str, str], Space]] = {}

    options: MemoryKVOptions

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)  # validates config.options with MemoryKVOptions
        self._space_key = (
            str(config.working_dir.expanduser().resolve()),
            config.workspace,
            config.namespace,
        )
        self._data: Space = {}

    # -- lifecycle: called by open()/close() only when the state changes -----------

    async def _open(self) -> None:
        self._data = self._spaces.setdefault(self._space_key, {})

    async def _close(self) -> None:
        self._data = {}

    async def _drop(self) -> None:
        self._data.clear()  # in place: other instances on this space see it too

    # -- reads: keys arrive distinct and valid; the base decodes the JSON text -------

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        return {key: self._data[key] for key in keys if key in self._data}

    async def _count(self) -> int:
        return len(self._data)

    async def _keys(self) -> AsyncIterator[str]:
        for key in list(self._data):  # a snapshot: safe while others write
            yield key

    # -- writes: the whole batch is validated before a hook sees it ------------------

    async def _upsert(self, records: dict[str, str]) -> None:
        limit = self.options.max_value_bytes
        if limit is not None:
            for key, text in records.items():
                size = len(text.encode("utf-8"))
                if size > limit:
                    raise InvalidValueError(
                        f"record {key!r} is {size} bytes as JSON; this store's "
                        f"max_value_bytes is {limit}"
                    )
        self._data.update(records)  # replaces whole records: no merge

    async def _delete(self, keys: list[str]) -> None:
        for key in keys:
            self._data.pop(key, None)  # missing keys are not an error
