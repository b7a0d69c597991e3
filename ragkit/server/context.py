"""The one dependency every workspace route uses: authenticate, check the
workspace name, resolve the principal, lease the workspace's RAG.

Order matters for what a response can reveal: the key is checked (401) and its
binding to the workspace (403, the same body whether the workspace exists or
not) before anything touches the workspace; a name that breaks the rule is a
400 either way, as it can never exist.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request

from ragkit.access import Principal
from ragkit.rag import RAG
from ragkit.server.keys import ApiKey, Scope
from ragkit.server.pool import PoolFullError
from ragkit.settings import WORKSPACE_PATTERN, WORKSPACE_RULE

NO_KEY = "missing API key: send `Authorization: Bearer <key>` or `X-API-Key: <key>` (create one with `ragkit keys create`)"
BAD_KEY = "unknown or revoked API key; create one with `ragkit keys create`"
FORBIDDEN = "this key may not use this workspace with this scope"
LOCAL_ONLY = "no API keys are configured, so only loopback clients are served; create one with `ragkit keys create`"


@dataclass
class RequestContext:
    """What a route answers with: the workspace's RAG and the caller's principal
    (``None``: keyless loopback mode, which reads everything)."""

    workspace: str
    rag: RAG
    key: ApiKey | None
    principal: Principal | None

    def read_options(self) -> dict[str, Any]:
        """``principal=`` for every RAG read (query, documents, graph, export)."""
        return {} if self.principal is None else {"principal": self.principal}

    def write_options(self) -> dict[str, Any]:
        """``principal=`` for every RAG write (insert, delete, graph edits): the
        same principal, as writes may only change what it may read."""
        return self.read_options()


def is_loopback(host: str | None) -> bool:
    if host in ("localhost", "testclient"):
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def token_of(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


def authenticate(request: Request) -> ApiKey | None:
    """The request's key; ``None`` in keyless loopback mode. Raises 401."""
    state = request.app.state.ragkit
    token = token_of(request)
    if token is None:
        if state.keys.active_count() == 0:
            client = request.client.host if request.client else None
            if is_loopback(state.settings.server.host) and is_loopback(client):
                return None
            raise HTTPException(401, LOCAL_ONLY)
        raise HTTPException(401, NO_KEY, headers={"WWW-Authenticate": "Bearer"})
    key = state.keys.lookup(token)
    if key is None:
        raise HTTPException(401, BAD_KEY, headers={"WWW-Authenticate": "Bearer"})
    return key


def require_key(scope: Scope = "read"):
    """A dependency for routes outside any workspace (metrics, readiness)."""

    def check(request: Request) -> ApiKey | None:
        key = authenticate(request)
        if key is not None and key.scope not in _AT_LEAST[scope]:
            raise HTTPException(403, FORBIDDEN)
        return key

    return check


_AT_LEAST = {"read": ("read", "write", "admin"), "write": ("write", "admin"), "admin": ("admin",)}


def principal_of(key: ApiKey | None) -> Principal | None:
    return None if key is None else Principal(user=key.user, groups=frozenset(key.groups))


def workspace_context(scope: Scope):
    async def dependency(request: Request, workspace: str) -> AsyncIterator[RequestContext]:
        key = authenticate(request)
        if not WORKSPACE_PATTERN.fullmatch(workspace):  # never exists: saying so reveals nothing
            raise HTTPException(400, f"invalid workspace name: {WORKSPACE_RULE}")
        if key is not None and not key.allows(workspace, scope):
            raise HTTPException(403, FORBIDDEN)
        state = request.app.state.ragkit
        try:
            async with state.pool.lease(workspace) as rag:
                yield RequestContext(workspace, rag, key, principal_of(key))
        except PoolFullError as exc:
            raise HTTPException(503, str(exc)) from None

    return dependency


read_context = workspace_context("read")
"""For routes that read (and the chat routers: ``ollama_router(read_context)``)."""
write_context = workspace_context("write")
admin_context = workspace_context("admin")
