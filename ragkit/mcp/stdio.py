"""``ragkit mcp``: the tools over stdio, for a desktop app or an IDE that
starts the server itself. One workspace (the settings'), opened once; every
call is made as the principal of ``[mcp]`` (``user``, ``groups``), with its
``scope``. Stdout carries the protocol: anything else goes to stderr."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ragkit.access import Principal
from ragkit.mcp.server import RagkitMCP
from ragkit.rag import RAG
from ragkit.sections.mcp import McpSettings
from ragkit.sections.server import ServerSettings
from ragkit.settings import Settings

T = TypeVar("T")


@dataclass
class StdioCaller:
    rag: RAG
    """Opened once, for the whole session; each call sees what other processes wrote (``RAG.aopen`` refreshes)."""
    principal: Principal | None
    can_write: bool
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One write at a time from this process (the RAG's writer lock serializes it with the others)."""

    @property
    def limits(self) -> ServerSettings:
        return self.rag.settings.server

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[RAG]:
        yield self.rag

    async def write(self, work: Callable[[RAG], Awaitable[T]]) -> T:
        async with self.writing:
            return await work(self.rag)


def principal_of(settings: McpSettings) -> Principal | None:
    return None if settings.user is None else Principal(user=settings.user, groups=frozenset(settings.groups))


async def serve_stdio(settings: Settings, rag: RAG | None = None) -> None:
    """Serve until the client closes stdin."""
    rag = rag or RAG(settings)
    caller = StdioCaller(rag, principal_of(settings.mcp), settings.mcp.scope == "write")

    def resolve(_: Any) -> StdioCaller:
        return caller

    async with rag:
        await RagkitMCP(resolve).run_stdio_async()
