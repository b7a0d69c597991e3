"""Errors of the chat routes, sent in each protocol's own error shape.

Routes raise ``ChatError``; a router's route class (``protocol_route``)
turns it, FastAPI's validation errors, the context dependency's
``HTTPException`` (401, 403) and ragkit's errors into a JSON response that
the protocol's official client understands (OpenAI: ``{"error": {"message",
"type", "param", "code"}}``; Ollama: ``{"error": "..."}``), with the status
and headers kept. The app's own ``HTTPException`` messages are kept as they
are; ragkit's pass through ``redact``; a model's failure is answered with its
cause only (``ModelError.public``), its whole message logged; an unexpected
error is logged and answered without its text. An error type the app registered a
handler for is left to that handler.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException  # FastAPI's is a subclass

from ragkit.errors import ConfigError, InvalidValueError, ModelError, RagkitError
from ragkit.redact import redact

log = logging.getLogger("ragkit.server.chat")

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "invalid_request_error", 422: "invalid_request_error"}


class ChatError(Exception):
    """A refused or failed chat request: HTTP status, message naming the fix,
    and for OpenAI's shape the offending parameter and a code."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    @property
    def type(self) -> str:
        return _TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")


Render = Callable[[ChatError], Response]


def protocol_route(render: Render) -> type[APIRoute]:
    """A route class whose errors ``render`` answers."""

    class ProtocolRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Any]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request)
                except Exception as exc:
                    if _app_handles(request, exc):
                        raise  # the app's own error type (its handler answers for every route)
                    return render(as_chat_error(exc))

            return guarded

    return ProtocolRoute


_OURS = (ChatError, HTTPException, RequestValidationError, RagkitError)


def _app_handles(request: Request, exc: Exception) -> bool:
    """The app registered a handler for this error type (not one of ours)."""
    if isinstance(exc, _OURS):
        return False
    handlers = getattr(request.app, "exception_handlers", {})
    return any(cls in handlers for cls in type(exc).__mro__ if cls not in (Exception, BaseException))


def as_chat_error(exc: Exception) -> ChatError:
    if isinstance(exc, ChatError):
        return exc
    if isinstance(exc, HTTPException):  # the app's own words (401, 403...): kept as they are
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        return ChatError(exc.status_code, detail, headers=dict(exc.headers or {}))
    if isinstance(exc, RequestValidationError):
        return validation_error(exc.errors())
    if isinstance(exc, InvalidValueError):
        return ChatError(400, redact(str(exc)))
    if isinstance(exc, ModelError):
        log.warning("chat: the model failed: %s", redact(str(exc), exc=exc))
        return ChatError(502, f"the model failed: {exc.public}")
    if isinstance(exc, (ConfigError, RagkitError)):
        log.warning("chat: %s", redact(str(exc)))
        return ChatError(500, redact(str(exc)))
    log.error("chat: unexpected error", exc_info=exc)
    return ChatError(500, "internal error while answering; the server log has the details")


def validation_error(errors: Any) -> ChatError:
    """FastAPI's validation errors as one message naming each field and what is wrong."""
    parts, first = [], None
    for err in errors:
        if tuple(err.get("loc", ())) == ("body",) and err.get("type") != "missing":
            # Not a JSON object; JSON only, so that a browser page cannot post here without CORS consent.
            return ChatError(400, "the body must be a JSON object sent with 'Content-Type: application/json'",
                             param="body", code="invalid_body")
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        first = first or where
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    message = "invalid request body: " + "; ".join(parts) + " (see the API's schema at /docs)"
    return ChatError(400, redact(message), param=first, code="invalid_value")
