"""What went wrong with a call to a model service, whichever client library
raised it (``classify``: retried or not), and the ``ModelError`` texts that
describe it: the full message naming the fix (``describe_failure``) and the
public text naming only the cause (``describe_cause``).
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from ragkit.errors import ModelError
from ragkit.redact import redact

Reason = Literal[
    "rate_limited", "server_error", "timeout", "connection", "malformed", "auth", "not_found", "bad_request", "other"
]
RETRYABLE: frozenset[Reason] = frozenset({"rate_limited", "server_error", "timeout", "connection", "malformed"})
_RETRYABLE_STATUS = {408, 409, 429}


# -- failures -------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """What went wrong with one call, whichever client library raised it."""

    reason: Reason
    status: int | None = None
    retry_after: float | None = None
    detail: str = ""

    @property
    def retryable(self) -> bool:
        return self.reason in RETRYABLE


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and those it was raised from or during (clients often
    re-raise an HTTP error as their own type)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _status(exc: BaseException) -> int | None:
    for err in _chain(exc):
        for source in (err, getattr(err, "response", None)):
            code = getattr(source, "status_code", None)
            if isinstance(code, int) and 100 <= code <= 599:
                return code
    return None


def _headers(exc: BaseException) -> Any:
    for err in _chain(exc):
        headers = getattr(getattr(err, "response", None), "headers", None)
        if headers is not None:
            return headers
    return None


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / scale
        except ValueError:
            value = _seconds_until(raw) if scale == 1.0 else None
        if value is not None and math.isfinite(value):
            return max(0.0, value)
    return None


def _seconds_until(http_date: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def _reason(status: int) -> Reason:
    if status == 429:
        return "rate_limited"
    if status >= 500 or status in _RETRYABLE_STATUS:
        return "server_error"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    return "bad_request" if 400 <= status < 500 else "other"


def classify(
    exc: BaseException,
    *,
    timeouts: tuple[type[BaseException], ...] = (),
    connection_errors: tuple[type[BaseException], ...] = (),
) -> Failure:
    """A ``Failure`` from any client's exception: the HTTP status and headers
    are read from ``exc.status_code`` / ``exc.response`` along the exception
    chain; ``timeouts`` and ``connection_errors`` are the client's own types
    (the built-in ``TimeoutError`` and ``ConnectionError`` always count)."""
    detail = _detail(exc)
    status = _status(exc)
    if status is not None:
        return Failure(_reason(status), status, parse_retry_after(_headers(exc)), detail)
    if isinstance(exc, (TimeoutError, *timeouts)):
        return Failure("timeout", detail=detail)
    if isinstance(exc, (ConnectionError, *connection_errors)):
        return Failure("connection", detail=detail)
    if _malformed(exc):
        return Failure("malformed", detail=detail)
    return Failure("other", detail=detail)


def _malformed(exc: BaseException) -> bool:
    """A 200 whose body is not the protocol's JSON (a proxy's error page, a
    truncated body): JSON decode errors anywhere along the exception chain, or
    a client's own "response validation" error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, json.JSONDecodeError) or "ResponseValidation" in type(seen).__name__:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _detail(exc: BaseException, limit: int = 300) -> str:
    """The server's own message when the client kept it (``exc.body`` of
    openai, ``exc.error`` of ollama), else the exception's text."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else getattr(exc, "error", None)
    # Scrubbed before it is cut short: a key cut in half would no longer match.
    text = redact(" ".join(str(message if isinstance(message, str) else exc).split()).rstrip("."), exc=exc)
    text = text or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- messages -------------------------------------------------------------------------


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` removed, fit for messages and ids."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


@dataclass(frozen=True)
class Service:
    """Who is being called, for error messages (never holds a secret)."""

    name: str
    """e.g. ``"OpenAI-compatible server"``."""
    url: str
    model: str
    credentials_hint: str = "check the api_key option"
    """How to fix credentials, e.g. ``"set api_key in [llm.options] or OPENAI_API_KEY"``."""
    timeout: float | None = None
    section: str = ""
    """The settings section of the adapter (llm, embedder, reranker), for public messages."""

    def label(self) -> str:
        return f"{self.name} at {without_credentials(self.url)} (model {self.model!r})"

    def public_name(self) -> str:
        """The service as a public message names it: by its part, never by its URL."""
        return _PUBLIC_NAMES.get(self.section, "the model server")

    def bad_response(self, problem: str, fix: str = "") -> ModelError:
        """A ``ModelError`` for an answer ragkit cannot use; ``problem`` is in
        ragkit's words (counts, lengths, a missing field), so it is public."""
        message = f"{self.label()} {problem}" + (f". Fix: {fix}" if fix else "")
        return ModelError(message, public=f"{self.public_name()} {problem}")


_PUBLIC_NAMES = {"llm": "the LLM server", "embedder": "the embedding server", "reranker": "the reranking server"}


def describe_cause(failure: Failure, service: Service, attempts: int) -> str:
    """The ``ModelError``'s public text: the cause class and the HTTP status,
    without the URL or the server's words (which may echo a credential)."""
    who, http = service.public_name(), f" (HTTP {failure.status})" if failure.status else ""
    tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}"
    within = f"within {service.timeout:g} s" if service.timeout else "in time"
    causes: dict[Reason, str] = {
        "auth": f"{who} refused the credentials{http}",
        "not_found": f"{who} does not know the model or the path{http}",
        "bad_request": f"{who} rejected the request{http}",
        "rate_limited": f"{who} was still rate limiting{tries}{http}",
        "server_error": f"{who} failed{tries}{http}",
        "timeout": f"{who} did not answer {within}{tries}",
        "connection": f"cannot connect to {who}{tries}",
        "malformed": f"{who} answered with a body that is not valid API JSON{tries}",
        "other": f"the call to {who} failed{tries}{http}",
    }
    return causes[failure.reason]


def describe_failure(failure: Failure, service: Service, attempts: int) -> str:
    """The ``ModelError`` message: what happened, then how to fix it."""
    where, detail = service.label(), f": {failure.detail}" if failure.detail else ""
    tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}"
    http = f"HTTP {failure.status}" if failure.status else ""
    messages: dict[Reason, str] = {
        "auth": f"{where} refused the credentials ({http}{detail}). Fix: {service.credentials_hint}",
        "not_found": (
            f"{where} answered {http}{detail}. Fix: check the model name (is it pulled or deployed "
            "there?) and base_url, including its path prefix (for example /v1)"
        ),
        "bad_request": (
            f"{where} rejected the request ({http}{detail}). Fix: check the adapter options sent "
            "with every call (model, extra_body, JSON mode, max tokens) against what the server supports"
        ),
        "rate_limited": (
            f"{where} was still rate limiting{tries} ({http}{detail}). Fix: lower max_concurrency, "
            "raise max_retries, or check the account's quota"
        ),
        "server_error": (
            f"{where} failed{tries} ({http}{detail}). Fix: check the server's status or logs; "
            "raise max_retries to keep trying longer"
        ),
        "timeout": (
            f"{where} did not answer within timeout = {service.timeout} s{tries}. Fix: raise timeout, "
            "or lower max_concurrency or the batch size"
        ),
        "connection": (
            f"cannot connect to {where}{tries}{detail}. Fix: check that the server is running and "
            "that base_url (host, port, path) is right"
        ),
        "malformed": (
            f"{where} answered with a body that is not valid API JSON{tries}{detail}. Fix: check that "
            "base_url points at the API itself (not a web page or proxy; for example ending in /v1) and "
            "that the server speaks this protocol"
        ),
        "other": f"{where} call failed{tries}{detail}",
    }
    return messages[failure.reason]
