"""The perimeter: what every request passes before any route reads it.

``KeyGate``, a pure ASGI middleware (no ``BaseHTTPMiddleware``: nothing is
read ahead, streams pass untouched): every path but the public ones needs an
active key, decided by ``context.authenticate`` from the headers alone, so a
request without one is a 401 before any of its body is read, whatever the
number of keys.

``check_startup`` is the same rule at start: no active key (and no keyless
setting) or keyless mode on a non-loopback host refuses to start.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import HTTPException
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ragkit.errors import ConfigError
from ragkit.server.config import ServerSettings
from ragkit.server.context import authenticate, is_loopback
from ragkit.server.keys import KeyStore

Refusal = Callable[[Scope, int, str, "dict[str, str] | None"], Response]
"""Builds the response that refuses a request (the app picks each route's error shape)."""


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
