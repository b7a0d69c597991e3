"""Stores opened for one test and dropped afterwards: the fixture every
server adapter's own tests need (``ragkit-redis``, ``ragkit-postgres``,
``ragkit-neo4j`` use it)::

    @pytest_asyncio.fixture
    async def stores():
        async with opened_stores() as open_store:
            yield open_store          # await open_store(MyStore, config)
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ragkit.protocols import StoreConfig

__all__ = ["opened_stores"]


@contextlib.asynccontextmanager
async def opened_stores() -> AsyncIterator[Callable[[type, StoreConfig], Awaitable[Any]]]:
    """``await open_store(cls, config)`` opens a store; on exit each one is
    dropped and closed, last opened first (one closed by the test is opened
    again to be dropped: a test leaves nothing on a shared server)."""
    opened: list[Any] = []

    async def open_store(cls: type, config: StoreConfig) -> Any:
        store = cls(config)
        await store.open()
        opened.append(store)
        return store

    try:
        yield open_store
    finally:
        for store in reversed(opened):
            if not store.is_open:
                await store.open()
            await store.drop()
            await store.close()
