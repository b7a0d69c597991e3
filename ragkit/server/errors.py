"""Errors as JSON ``{"error": message}``: the message names the field and the fix.

Every message passes through ``ragkit.redact`` (a backend's error may quote a
password or a key); request values are never echoed (they may be secrets). A
model's failure is a 502 that names only its cause (``public_message``); the
whole message, with the model server's URL and words, goes to the log.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragkit.errors import (
    DocumentNotFoundError, ElementExistsError, ElementNotFoundError, ExportError, GraphEditError,
    InvalidValueError, ModelError, RagkitError, WriteAccessError, WriterLeaseLostError, WriterLockTimeoutError,
    public_message,
)
from ragkit.redact import redact

log = logging.getLogger(__name__)


def error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": redact(message)}, status_code=status, headers=headers)


def describe(errors: list[dict]) -> str:
    parts = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        where = ".".join(loc[1:] if loc and loc[0] in ("body", "query", "path", "form") else loc) or "body"
        parts.append(f"{where}: {err.get('msg')}")
    return "; ".join(parts) + ". Fix: correct these fields (the schema is at /openapi.json)"


_STATUS = [
    (WriteAccessError, 422),  # before ValueError: it names the request's access list
    (DocumentNotFoundError, 404), (ElementNotFoundError, 404), (ElementExistsError, 409),
    (GraphEditError, 400), (ExportError, 400), (InvalidValueError, 400), (ValueError, 400),
    # another process (a CLI run, another worker) holds the workspace's writer
    # lock past [lock] timeout: busy, not broken, so the client may retry
    (WriterLockTimeoutError, 503),
    # this worker stalled past [lock] lease_ttl and another writer took over:
    # nothing more of the request was written; a retry runs after that writer
    (WriterLeaseLostError, 503),
]


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, describe(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RagkitError)
    async def _ragkit(request: Request, exc: RagkitError) -> JSONResponse:
        for kind, status in _STATUS:
            if isinstance(exc, kind):
                return error(status, str(exc))
        log.warning("%s on %s: %s", type(exc).__name__, request.url.path, redact(str(exc), exc=exc))
        # the model server failed, not ragkit: a bad gateway, as the chat routes say it
        return error(502 if isinstance(exc, ModelError) else 500, public_message(exc))



class CatchAll:
    """An unexpected error is a JSON 500 and a redacted log line, and the
    connection stays usable (Starlette's own handler re-raises to the server,
    which then drops the keep-alive connection)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        started = [False]

        async def sending(message) -> None:
            started[0] = started[0] or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if scope["type"] != "http":
                raise
            log.error("unexpected %s on %s", type(exc).__name__, scope.get("path"), exc_info=exc)
            if started[0]:
                raise  # the status line is out: only closing the connection tells the client
            await error(500, f"internal error ({type(exc).__name__}); the server log has the details")(scope, receive, send)
