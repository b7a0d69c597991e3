"""A bounded pool of open workspaces (one ``RAG`` each), opened lazily.

An entry counts its leases (requests, streams and the writer's job hold one);
only an entry with none is closed: when it has been idle for
``idle_timeout`` seconds, or when the pool is full and a new workspace needs
its place (the least recently used idle one goes). A full pool of busy
workspaces answers 503 rather than close one under a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core.files import private_dir
from ragkit.rag import RAG
from ragkit.settings import Settings

log = logging.getLogger(__name__)


class PoolFullError(Exception):
    pass


@dataclass
class _Entry:
    rag: RAG
    leases: int = 0
    last_used: float = field(default_factory=time.monotonic)


class WorkspacePool:
    def __init__(self, settings: Settings, on_close: Callable[[RAG], None] | None = None) -> None:
        self.settings = settings
        self.size = settings.server.pool_size
        self.idle_timeout = settings.server.idle_timeout
        self.on_close = on_close or (lambda rag: None)
        self._entries: dict[str, _Entry] = {}
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Task | None = None

    def open_rags(self) -> list[RAG]:
        return [e.rag for e in self._entries.values()]

    def exists(self, workspace: str) -> bool:
        """Whether a write ever made the workspace (its folder is its mark,
        whichever backends hold its data)."""
        return workspace in self._entries or (Path(self.settings.working_dir) / workspace).is_dir()

    @contextlib.asynccontextmanager
    async def lease(self, workspace: str, wait: bool = False, create: bool = True) -> AsyncIterator[RAG]:
        """The workspace's RAG, held open until the block ends; ``create``
        makes it if it does not exist (reads check ``exists`` first). A full
        pool of busy workspaces raises ``PoolFullError``, or with ``wait`` is
        waited out."""
        if create:
            private_dir(Path(self.settings.working_dir) / workspace)
        while True:
            try:
                entry = await self._acquire(workspace)
                break
            except PoolFullError:
                if not wait:
                    raise
                await asyncio.sleep(0.5)
        try:
            yield entry.rag
        finally:
            entry.leases -= 1
            entry.last_used = time.monotonic()

    async def _acquire(self, workspace: str) -> _Entry:
        async with self._lock:
            entry = self._entries.get(workspace)
            if entry is None:
                if len(self._entries) >= self.size:
                    await self._evict_one()
                rag = RAG(self.settings.model_copy(update={"workspace": workspace}))
                await rag.aopen()
                entry = self._entries[workspace] = _Entry(rag)
            entry.leases += 1
            entry.last_used = time.monotonic()
            return entry

    async def _evict_one(self) -> None:
        idle = [(e.last_used, name) for name, e in self._entries.items() if e.leases == 0]
        if not idle:
            raise PoolFullError(
                f"all {self.size} open workspaces are busy; retry, or raise [server] pool_size"
            )
        await self._close(min(idle)[1])

    async def _close(self, workspace: str) -> None:
        entry = self._entries.pop(workspace)
        self.on_close(entry.rag)
        try:
            await entry.rag.aclose()
        except Exception as exc:  # closing one workspace must not fail the request of another
            log.warning("closing workspace %s failed: %s", workspace, type(exc).__name__)

    async def reap_idle(self) -> None:
        async with self._lock:
            now = time.monotonic()
            for name in [n for n, e in self._entries.items() if e.leases == 0 and now - e.last_used >= self.idle_timeout]:
                await self._close(name)

    def start(self) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(min(self.idle_timeout / 4, 30))
                await self.reap_idle()

        self._reaper = asyncio.create_task(loop())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        async with self._lock:
            for name in list(self._entries):
                await self._close(name)
