"""The perimeter: what every request passes before any route reads it.

Four pure ASGI middlewares (no ``BaseHTTPMiddleware``: nothing is read ahead,
streams pass untouched), met in this order:

1. ``HostGuard``: the ``Host`` header must name this server (``[server]
   allowed_hosts``, loopback names by default), on every path, ``/health``
   too. A page whose DNS name was rebound to 127.0.0.1 still sends its own
   name, so it is refused (400).
2. ``OriginGuard``: a POST, PUT, PATCH or DELETE sent by a page of another
   origin (``Origin``, or ``Sec-Fetch-Site: cross-site``) is a 403 unless
   ``[server] allowed_origins`` names it. A request without ``Origin`` (curl,
   SDKs: no browser) passes. A web UI on this server is same-origin and sends
   its key in a header, never a cookie.
3. ``KeyGate``: every path but the public ones needs an active key, decided
   by ``context.authenticate`` from the headers alone, so a request without
   one is a 401 before any of its body is read, whatever the number of keys.
4. ``BodyLimit``: a body over the route's cap (``body_cap``) is a 413: at
   once when ``Content-Length`` says so, otherwise as soon as the bytes
   received pass the cap, so nothing over it is buffered or spooled.

``check_startup`` is the same rule at start: no active key (and no keyless
setting) or keyless mode on a non-loopback host refuses to start.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ragkit.errors import ConfigError
from ragkit.sections.server import ServerSettings, host_name, origin_of
from ragkit.server.context import authenticate, is_loopback
from ragkit.server.keys import KeyStore

Refusal = Callable[[Scope, int, str, "dict[str, str] | None"], Response]
"""Builds the response that refuses a request (the app picks each route's error shape)."""

HOST_REFUSED = ("the Host header names no host this server answers to; "
                "add it to `[server] allowed_hosts` (RAGKIT_SERVER__ALLOWED_HOSTS)")
ORIGIN_REFUSED = ("cross-origin request refused: a page of another origin may not change anything here; "
                  "add its origin to `[server] allowed_origins` (RAGKIT_SERVER__ALLOWED_ORIGINS) to allow it")
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?")
"""A ``Host`` header: a name or address, then an optional port."""
_UPLOAD = re.compile(r"/w/[^/]+/documents/upload")
_TEXTS = re.compile(r"/w/[^/]+/documents/texts")


def served_hosts(server: ServerSettings) -> list[str]:
    """``allowed_hosts``, plus the bind host when it names one address or name
    (``0.0.0.0`` and ``::`` name every address, so none is added)."""
    bind = host_name(server.host)
    return [*server.allowed_hosts, bind] if bind not in ("", "0.0.0.0", "::") else list(server.allowed_hosts)


def body_cap(path: str, server: ServerSettings) -> tuple[int, str]:
    """The largest body ``path`` accepts, and the settings it is made of.
    Uploads stream to disk, so they may carry every file at its largest;
    inserted texts arrive as one JSON body held in memory, so they may carry
    one text at its largest (more belong in an upload)."""
    if _UPLOAD.fullmatch(path):
        return (server.max_upload_files * server.max_upload_bytes + server.max_body_bytes,
                "[server] max_upload_files * max_upload_bytes + max_body_bytes")
    if _TEXTS.fullmatch(path):
        return server.max_upload_bytes + server.max_body_bytes, "[server] max_upload_bytes + max_body_bytes"
    return server.max_body_bytes, "[server] max_body_bytes"


class HostGuard:
    """The ``Host`` allow-list. Starlette's ``TrustedHostMiddleware`` matches
    the same patterns (``*``, ``*.example.com``), but its 400 ("Invalid host
    header") cannot say which setting to change, and that is the fix."""

    def __init__(self, app: ASGIApp, allowed: list[str], refuse: Refusal) -> None:
        self.app, self.refuse = app, refuse
        self.any = "*" in allowed
        self.names = frozenset(a for a in allowed if not a.startswith("*"))
        self.suffixes = tuple(a[1:] for a in allowed if a.startswith("*."))

    def allows(self, header: str | None) -> bool:
        match = _HOST.fullmatch(header or "")
        name = host_name(match.group(1)) if match else None
        return self.any or (name is not None and (name in self.names or name.endswith(self.suffixes)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.allows(Headers(scope=scope).get("host")):
            await self.refuse(scope, 400, HOST_REFUSED, None)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class OriginGuard:
    """State-changing requests from another origin's page are refused."""

    def __init__(self, app: ASGIApp, allowed: list[str], refuse: Refusal) -> None:
        self.app, self.refuse = app, refuse
        self.allowed = frozenset(allowed)

    def cross_origin(self, scope: Scope) -> bool:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        claimed = origin_of(origin) if origin is not None else None
        if claimed is not None and claimed in self.allowed:
            return False
        if headers.get("sec-fetch-site") == "cross-site":
            return True
        # The Host passed HostGuard, so the page that shares it is this server's own.
        own = origin_of(f"{scope['scheme']}://{headers.get('host', '')}")
        return origin is not None and (claimed is None or claimed != own)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in STATE_CHANGING and self.cross_origin(scope):
            await self.refuse(scope, 403, ORIGIN_REFUSED, None)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class KeyGate:
    """No key, no body: the key is checked from the headers before the app
    (FastAPI parses a body, spooling uploads, before any dependency runs)."""

    def __init__(self, app: ASGIApp, public: frozenset[str], refuse: Refusal) -> None:
        self.app, self.public, self.refuse = app, public, refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.public:
            try:
                authenticate(HTTPConnection(scope))
            except HTTPException as exc:
                await self.refuse(scope, exc.status_code, str(exc.detail), exc.headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a body passes its cap: the route's own
    error handler answers it (413), in the route's shape (JSON, or a chat
    protocol's), and FastAPI lets an ``HTTPException`` through its body parsing."""


class BodyLimit:
    """Bodies capped while they stream. FastAPI >= 0.16x has ``max_body_size``,
    but fixed where routes are declared (module-level routers here, while the
    caps are settings known in ``create_app``) and answered with a 413 that
    names no limit; the project also supports older FastAPI."""

    def __init__(self, app: ASGIApp, server: ServerSettings, refuse: Refusal) -> None:
        self.app, self.server, self.refuse = app, server, refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap, settings = body_cap(scope["path"], self.server)
        message = f"the request body is over this route's limit of {cap} bytes ({settings})"
        if _declared_length(scope) > cap:
            await self.refuse(scope, 413, message, None)(scope, receive, send)
            return
        await self.app(scope, _counted(receive, cap, message), send)


def _declared_length(scope: Scope) -> int:
    value = Headers(scope=scope).get("content-length", "")
    return int(value) if value.isdigit() else 0  # absent (chunked): counted as it streams


def _counted(receive: Receive, cap: int, message: str) -> Receive:
    received = 0

    async def counting() -> dict:
        nonlocal received
        event = await receive()
        received += len(event.get("body", b""))
        if received > cap:
            raise BodyTooLarge(413, message)
        return event

    return counting


def check_keyless(server: ServerSettings) -> None:
    """Keyless mode only on a loopback host: anyone who can reach the port gets everything."""
    if server.allow_keyless and not is_loopback(server.host):
        raise ConfigError(
            f"keyless mode (`[server] allow_keyless`, `--allow-keyless`) serves without a key, so only on a loopback "
            f"host, not {server.host!r}: bind 127.0.0.1, or create keys (`ragkit keys create`) and turn keyless mode off"
        )


def check_startup(server: ServerSettings, keys: KeyStore) -> None:
    """Refuse to start a server that would be open (keyless off loopback) or
    that has no key to open it (every request would be a 401)."""
    check_keyless(server)
    if not server.allow_keyless and keys.active_count() == 0:
        raise ConfigError(
            f"no active API key in {keys.path}, so every request would be refused: create one with "
            "`ragkit keys create --workspace default --user NAME --scope write`, or, for local single-user use, "
            "run `ragkit serve --allow-keyless` (loopback only; `[server] allow_keyless = true`)"
        )
