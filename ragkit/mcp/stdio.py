"""``ragkit mcp``: the tools over stdio, for a desktop app or an IDE that
starts the server itself. One workspace (the settings'), opened once; every
call is made as the principal of ``[mcp]`` (``user``, ``groups``), with its
``scope``. Stdout carries the protocol: anything else goes to stderr."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ragkit.access import Principal
from ragkit.mcp.server import RagkitMCP
from ragkit.mcp.tools import SerialWriter, opened
from ragkit.rag import RAG
from ragkit.sections.mcp import McpSettings
from ragkit.sections.server import ServerSettings
from ragkit.settings import Settings

T = TypeVar("T")


@dataclass
class StdioCaller:
    rag: RAG
    principal: Principal | None
    can_write: bool
    writer: SerialWriter = field(default_factory=SerialWriter)

    @property
    def limits(self) -> ServerSettings:
        return self.rag.settings.server

    def reading(self) -> contextlib.AbstractAsyncContextManager[RAG]:
        return opened(self.rag)

    async def write(self, work: Callable[[RAG], Awaitable[T]]) -> T:
        return await self.writer.run(self.rag, work)


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
