"""The app factory: ``create_app(settings)`` for ``ragkit serve``, Python and tests.

Workspace routes live under ``/w/{workspace}/`` (``/w/default/query``); the
name follows ``Settings.workspace``'s rule. Each area's router carries that
prefix itself, so a route's template (the metrics label) is the full path.
The chat routers (``ragkit.server.chat``: Ollama's ``/api/...`` and
OpenAI's ``/v1/...``) are mounted under the same prefix and take the same
dependency, ``read_context`` (the one place that authenticates, checks the
workspace and resolves the principal), so ``tests/server/test_server_security.py``
checks them too (every route of the app without a key is a 401).

Before any route, every request passes the perimeter
(``ragkit.server.perimeter``): the Host allow-list, the Origin check, the key
(from the headers, before the body) and the body caps.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from dataclasses import dataclass, field
from urllib.parse import unquote

from collections.abc import Iterator

from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import Scope

from ragkit import __version__
from ragkit.sections.server import keys_path
from ragkit.server.mcp_http import mount_mcp
from ragkit.server import errors, logs, webui
from ragkit.server.chat import ollama_router, openai_router
from ragkit.server.chat.errors import ChatError
from ragkit.server.chat.openai_api import render_error as openai_error
from ragkit.server.context import read_context, warn_if_no_active_key
from ragkit.server.jobs import JobManager
from ragkit.server.keys import KeyStore
from ragkit.server.metrics import Metrics, MetricsMiddleware
from ragkit.server.perimeter import BodyLimit, HostGuard, KeyGate, OriginGuard, check_keyless, served_hosts
from ragkit.server.pool import WorkspacePool
from ragkit.server.routes_documents import router as documents_router
from ragkit.server.routes_graph import router as graph_router
from ragkit.server.routes_query import router as query_router
from ragkit.server.routes_system import router as system_router
from ragkit.server.routes_webui import router as webui_router
from ragkit.settings import WORKSPACE_PATTERN, WORKSPACE_RULE, Settings, load_settings

log = logging.getLogger("ragkit.server")
PUBLIC_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
"""The only routes served without a key: liveness and the API's own description."""
WORKSPACE_PREFIX = "/w/{workspace}"
_OPENAI_PATH = re.compile(r"/w/[^/]+/v1/")


@dataclass
class ServerState:
    settings: Settings
    keys: KeyStore
    pool: WorkspacePool
    jobs: JobManager
    metrics: Metrics
    model_checks: dict[str, tuple[float, str]] = field(default_factory=dict)
    """``/ready``'s last model checks: name -> (when, result)."""
    warned_no_key: bool = False
    """The "no active key" warning is out (``context.warn_if_no_active_key``)."""


SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the GIL while another waits for it (CPython's
default: 0.005). The loop answers every request, and it takes the GIL again
after each wait for sockets; while worker threads compute (a query's context,
a flush's encoding, the writer's checks) each of those takes up to one
interval per busy thread, and a request passes through several. Measured
with three busy threads on this 2-core machine: a 2 ms sleep on the loop
came back after 93-123 ms (median) at 0.005 and 11-32 ms at 0.001."""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings().settings
    check_keyless(settings.server)
    keys = KeyStore(keys_path(settings.working_dir, settings.server))
    metrics_box: list[Metrics] = []
    pool = WorkspacePool(settings, on_close=lambda rag: metrics_box[0].retire(rag))
    jobs = JobManager(settings.working_dir, pool)
    metrics = Metrics(pool.open_rags, jobs.queue_depth)
    metrics_box.append(metrics)
    state = ServerState(settings, keys, pool, jobs, metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        previous = sys.getswitchinterval()
        sys.setswitchinterval(min(previous, SWITCH_INTERVAL))
        logs.install()
        warn_if_no_active_key(state)
        pool.start()
        resumed = jobs.resume()
        if resumed:
            log.info("resuming %d unfinished ingestion job(s)", len(resumed))
        try:
            yield
        finally:
            await jobs.close()
            await pool.close()
            sys.setswitchinterval(previous)

    app = FastAPI(title="ragkit", version=__version__, lifespan=lifespan,
                  description="Graph-RAG over HTTP: documents, query and graph per workspace (`/w/{workspace}/...`).")
    app.state.ragkit = state
    errors.install(app)
    for router in (system_router, documents_router, query_router, graph_router):
        app.include_router(router)
    for chat in (ollama_router, openai_router):  # Open WebUI, the ollama and openai clients
        app.include_router(chat(read_context), prefix=WORKSPACE_PREFIX)
    mount_mcp(app)  # /w/{workspace}/mcp: the MCP tools over streamable HTTP (ragkit.server.mcp_http)
    app.include_router(webui_router)  # the web UI's own API calls (keys, like every route)
    webui.mount(app)  # its static shell at / (no key: it holds no data)
    _add_middleware(app, settings)
    return app


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """A request meets them in the reverse order of the calls (each call wraps
    the ones before): metrics, catch-all, Host, Origin, key, body cap,
    workspace name. The key is checked before the body is read, and nothing
    unauthenticated learns even whether a workspace name is valid."""
    server = settings.server
    app.add_middleware(WorkspaceNameGuard)
    app.add_middleware(BodyLimit, server=server, refuse=refusal)
    app.add_middleware(KeyGate, public=PUBLIC_PATHS | webui.public_paths(), refuse=refusal)
    app.add_middleware(OriginGuard, allowed=server.allowed_origins, refuse=refusal)
    app.add_middleware(HostGuard, allowed=served_hosts(server), refuse=refusal)
    app.add_middleware(errors.CatchAll)
    app.add_middleware(MetricsMiddleware, metrics=app.state.ragkit.metrics)


def refusal(scope: Scope, status: int, message: str, headers: dict[str, str] | None) -> Response:
    """The perimeter's refusals in the shape each route's clients read: the
    OpenAI client's under ``/v1/``; elsewhere ``{"error": message}`` (Ollama's too)."""
    if _OPENAI_PATH.match(scope["path"]):
        return openai_error(ChatError(status, message, headers=headers))
    return errors.error(status, message, headers)


def route_table(app: FastAPI) -> Iterator[tuple[str, str]]:
    """Every (method, path template) the app serves, however routers nest
    (FastAPI >= 0.16x keeps included routers as objects, older ones flatten)."""

    def walk(routes, prefix: str) -> Iterator[tuple[str, str]]:
        for route in routes:
            included = getattr(route, "original_router", None)
            if included is not None:
                yield from walk(included.routes, prefix + route.include_context.prefix)
                continue
            for method in sorted(getattr(route, "methods", None) or ()):
                if method != "HEAD":
                    yield method, prefix + route.path

    return walk(app.routes, "")


def app_from_env() -> FastAPI:
    """For ``uvicorn --factory`` (``ragkit serve --workers N``): settings from the usual sources."""
    return create_app()


class WorkspaceNameGuard:
    """A bad workspace name is a 400 naming the rule, however it is spelled:
    the raw path is checked (``%2e%2e``, ``a%2Fb``, ``%00``), before routing
    could turn it into another route or a 404."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            raw = (scope.get("raw_path") or scope["path"].encode()).split(b"?", 1)[0]
            if raw.startswith(b"/w/"):
                segment = raw[3:].split(b"/", 1)[0]
                name = unquote(segment.decode("latin-1"))
                if not WORKSPACE_PATTERN.fullmatch(name):
                    response = errors.error(400, f"invalid workspace name: {WORKSPACE_RULE}")
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
