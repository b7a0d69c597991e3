"""``MemoryKVStore``: a pure-Python, in-memory implementation of ``KVStore``.

Everything a real adapter needs is here, in miniature:

- a registered ``name`` (what users put in ``ragkit.toml``: ``[kv] name = "example-memory"``);
- its own ``Options`` model (pydantic, ``extra="forbid"`` so that a typo in
  ``[kv.options]`` is an error instead of being ignored);
- an honest ``capabilities`` declaration, which tells the contract suite what to test;
- the lifecycle (``open``/``flush``/``close``/``drop``) and workspace isolation.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ragkit.errors import InvalidValueError
from ragkit.protocols import Capability, KVStore, StoreConfig
from ragkit.protocols.kv import encode_record


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
        self._data: Space | None = None

    def _space(self) -> Space:
        self._check_open()  # raises StoreClosedError before open() / after close()
        assert self._data is not None
        return self._data

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> None:
        self._data = self._spaces.setdefault(self._space_key, {})
        self._open = True

    async def close(self) -> None:
        self._open = False
        self._data = None

    async def drop(self) -> None:
        self._space().clear()  # in place: other instances on this space see it too

    # -- reads -----------------------------------------------------------------

    async def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        data = self._space()
        out: list[dict[str, Any] | None] = []
        for key in keys:
            text = data.get(key) if isinstance(key, str) else None
            # Decoding per asked position returns a fresh copy every time.
            out.append(None if text is None else json.loads(text))
        return out

    async def count(self) -> int:
        return len(self._space())

    def keys(self) -> AsyncIterator[str]:
        return self._iter_keys(list(self._space()))  # a snapshot: safe while others write

    @staticmethod
    async def _iter_keys(snapshot: list[str]) -> AsyncIterator[str]:
        for key in snapshot:
            yield key

    # -- writes ----------------------------------------------------------------

    async def upsert(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        data = self._space()
        if not isinstance(records, Mapping):
            raise InvalidValueError(
                f"upsert takes a mapping of key -> record, got {type(records).__name__}"
            )
        # Validate everything before writing anything.
        encoded = {key: encode_record(key, value) for key, value in records.items()}
        limit = self.options.max_value_bytes
        if limit is not None:
            for key, text in encoded.items():
                size = len(text.encode("utf-8"))
                if size > limit:
                    raise InvalidValueError(
                        f"record {key!r} is {size} bytes as JSON; this store's "
                        f"max_value_bytes is {limit}"
                    )
        data.update(encoded)  # replaces whole records: no merge

    async def delete(self, keys: Iterable[str]) -> None:
        data = self._space()
        if isinstance(keys, str):
            keys = [keys]
        for key in keys:
            if isinstance(key, str):
                data.pop(key, None)  # missing keys are not an error
