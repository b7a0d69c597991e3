"""The tools over streamable HTTP under ``ragkit serve``: ``/w/{workspace}/mcp``.

A route of the app like the others, so the perimeter has passed every request
before it gets here (Host, Origin, the key: 401 without one, body cap). Here
the key's binding is checked as ``read_context`` does (403, one body), then
the SDK's session manager answers. Each tool call resolves its caller from
its own HTTP request: the key's principal and scope, and the server's pool
(reads lease the workspace's open RAG) and writer queue (writes). Nothing
opens a store of its own.

Stateless mode: no MCP session outlives a request, so no session id stands
for a key; every request is authenticated by its own headers.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, HTTPException
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ragkit.access import Principal
from ragkit.mcp.server import RagkitMCP
from ragkit.rag import RAG
from ragkit.sections.server import ServerSettings
from ragkit.server import errors
from ragkit.server.context import FORBIDDEN, NO_WORKSPACE, authenticate, principal_of
from ragkit.server.keys import ApiKey
from ragkit.server.pool import PoolFullError

PATH = "/w/{workspace}/mcp"
T = TypeVar("T")


@dataclass
class HttpCaller:
    state: Any
    """The app's ``ServerState`` (pool, writer queue)."""
    workspace: str
    key: ApiKey | None
    """``None``: keyless mode, a loopback client with full access."""

    @property
    def principal(self) -> Principal | None:
        return principal_of(self.key)

    @property
    def limits(self) -> ServerSettings:
        return self.state.settings.server

    @property
    def can_write(self) -> bool:
        return self.key is None or self.key.allows(self.workspace, "write")

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[RAG]:
        if not self.state.pool.exists(self.workspace):  # a read never creates one
            raise ToolError(NO_WORKSPACE.format(workspace=self.workspace))
        try:
            async with self.state.pool.lease(self.workspace, create=False) as rag:
                yield rag
        except PoolFullError as exc:
            raise ToolError(str(exc)) from None

    async def write(self, work: Callable[[RAG], Awaitable[T]]) -> T:
        return await self.state.jobs.run_write(self.workspace, work)


def resolve(ctx: Any) -> HttpCaller:
    request = ctx.request
    if request is None:
        raise ToolError("no HTTP request behind this call")
    return HttpCaller(request.app.state.ragkit, request.path_params["workspace"], authenticate(request))


class McpEndpoint:
    """The ASGI endpoint: the key's workspace binding, then the SDK."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        conn = HTTPConnection(scope)
        try:
            key = authenticate(conn)  # decided by the perimeter's KeyGate; 401 there already
        except HTTPException as exc:
            await errors.error(exc.status_code, str(exc.detail), exc.headers)(scope, receive, send)
            return
        if key is not None and not key.allows(conn.path_params["workspace"], "read"):
            await errors.error(403, FORBIDDEN)(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)


def mount_mcp(app: FastAPI) -> None:
    """Serve MCP at ``/w/{workspace}/mcp``; the SDK's session manager runs
    inside the app's lifespan (started after the pool, stopped before it)."""
    server = app.state.ragkit.settings.server
    mcp = RagkitMCP(resolve)
    mcp.streamable_http_app(  # builds the session manager; its own Starlette app is not used
        json_response=True, stateless_http=True, max_request_body_size=server.max_body_bytes,
        # The perimeter checks Host and Origin against [server] allowed_hosts/allowed_origins.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = mcp.session_manager
    # POST only: stateless, there is no session to stream on (GET) or to end (DELETE).
    app.router.routes.append(Route(PATH, McpEndpoint(manager), methods=["POST"], name="mcp"))
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: FastAPI) -> AsyncIterator[Any]:
        async with inner(a) as state, manager.run():
            yield state

    app.router.lifespan_context = lifespan
