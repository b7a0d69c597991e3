"""The one dependency every workspace route uses: authenticate, check the
workspace name, resolve the principal, lease the workspace's RAG.

Order matters for what a response can reveal: the key is checked (401) and its
binding to the workspace (403, the same body whether the workspace exists or
not) before anything touches the workspace; a name that breaks the rule is a
400 either way, as it can never exist.

``authenticate`` is the one place that decides who a request is. The
perimeter's gate (``ragkit.server.perimeter.KeyGate``) calls it from the
headers before any of the body is read; the decision is kept in the request's
scope, and the route's dependency reads it back to check the workspace
binding and the scope.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.requests import HTTPConnection

from ragkit.access import Principal
from ragkit.rag import RAG
from ragkit.server.keys import ApiKey, Scope
from ragkit.server.pool import PoolFullError
from ragkit.settings import WORKSPACE_PATTERN, WORKSPACE_RULE

NO_KEY = ("missing API key: send it as a Bearer token in the Authorization header, or in an X-API-Key header "
          "(create one with `ragkit keys create`)")
"""Worded without ``Header: value``, which ``ragkit.redact`` (every error's last step) would mask."""
BAD_KEY = "unknown or revoked API key; create one with `ragkit keys create`"
FORBIDDEN = "this key may not use this workspace with this scope"
NO_WORKSPACE = ("no workspace {workspace!r} yet: reads never create one; the first write "
                "(an upload, a text, a graph edit) does")
LOCAL_ONLY = "keyless mode serves loopback clients only; send a key (create one with `ragkit keys create`)"
NO_ACTIVE_KEY = ("no active API key: every request but /health and the API docs is refused (401) until one is "
                 "created with `ragkit keys create --workspace NAME --user NAME --scope read`")
DECIDED = "ragkit.key"
"""Where the request's scope keeps ``authenticate``'s decision (the key, or ``None``)."""
log = logging.getLogger("ragkit.server")


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


def token_of(conn: HTTPConnection) -> str | None:
    auth = conn.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return conn.headers.get("x-api-key") or None


def authenticate(conn: HTTPConnection) -> ApiKey | None:
    """The request's active key; ``None`` in keyless mode for a loopback
    client that sent none. Raises 401. Decided once per request (headers
    only, so before the body) and kept in its scope."""
    if DECIDED not in conn.scope:
        conn.scope[DECIDED] = _decide(conn)
    return conn.scope[DECIDED]


def _decide(conn: HTTPConnection) -> ApiKey | None:
    state = conn.app.state.ragkit
    token = token_of(conn)
    if token is None and state.settings.server.allow_keyless:
        if is_loopback(conn.client.host if conn.client else None):
            return None
        raise HTTPException(401, LOCAL_ONLY, headers={"WWW-Authenticate": "Bearer"})
    key = state.keys.lookup(token) if token is not None else None
    if key is None:
        warn_if_no_active_key(state)
        raise HTTPException(401, NO_KEY if token is None else BAD_KEY, headers={"WWW-Authenticate": "Bearer"})
    return key


def warn_if_no_active_key(state) -> None:
    """Warn once each time the last active key is gone (revoked while the
    server runs, or none at start): the server now refuses every request.
    Whatever the number of keys, no key never means no check."""
    if state.settings.server.allow_keyless:
        return
    gone = state.keys.active_count() == 0
    if gone and not state.warned_no_key:
        log.warning(NO_ACTIVE_KEY)
    state.warned_no_key = gone


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
        if scope == "read" and not state.pool.exists(workspace):  # a read never creates one
            raise HTTPException(404, NO_WORKSPACE.format(workspace=workspace))
        try:
            async with state.pool.lease(workspace, create=scope != "read") as rag:
                yield RequestContext(workspace, rag, key, principal_of(key))
        except PoolFullError as exc:
            raise HTTPException(503, str(exc)) from None

    return dependency


read_context = workspace_context("read")
"""For routes that read (and the chat routers: ``ollama_router(read_context)``)."""
write_context = workspace_context("write")
admin_context = workspace_context("admin")


async def model_response(model: BaseModel) -> Response:
    """A route's model as JSON in one pass of pydantic-core. Returned as a
    dict instead, FastAPI walks it twice with ``jsonable_encoder`` in Python:
    a 10,000-node subgraph took 6.7 s of the loop that way, 0.26 s this way.
    In a worker thread: the model is this request's own, and the loop
    answers other requests meanwhile."""
    return Response(await asyncio.to_thread(model.model_dump_json), media_type="application/json")
