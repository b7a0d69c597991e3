"""Calling a model service over the network: one retry policy, one limit on
calls in flight and one usage log, shared by every remote model adapter.

An adapter subclasses ``RemoteModel`` (which resolves ``base_url`` and the
API key from ``RemoteOptions`` and the environment, and makes its client on
first use) and sends every request through ``self.calls``::

    response = await self.calls.run(lambda: self.client().chat.completions.create(...))
    async for chunk in self.calls.stream(lambda: self.client().chat(..., stream=True)):
        ...
    self.usage.record(request.role, input_tokens, output_tokens)

What it does with a failure (``classify``):

- retried: HTTP 408, 409, 429 and 5xx, timeouts and connection errors, after
  an exponential backoff with jitter, or after the server's ``Retry-After``
  (``retry-after-ms``) when it sends one; a ``Retry-After`` longer than
  ``max_retry_after`` gives up at once instead of sleeping for an hour;
- not retried: everything else (401, 404, 400...);
- either way the last failure becomes a ``ModelError`` that names the service,
  the model and the fix (``describe_failure``), with the server's own words;
  its ``public`` text, all a client of ``ragkit serve`` sees, names only the
  cause (``describe_cause``): "the LLM server refused the credentials (HTTP
  401)", never the URL or what the server said.

The client library's own retries must be off (``max_retries=0``), so that
this is the single policy. A streamed response is retried only until its first
piece arrives: after that, a retry would repeat text already handed out.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import time
from collections import Counter, defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ragkit._loop_thread import close_items
from ragkit.errors import ConfigError, ModelError
from ragkit.ids import digest
from ragkit.protocols.models import ModelAdapter, Usage
from ragkit.redact import redact

T = TypeVar("T")

Reason = Literal[
    "rate_limited", "server_error", "timeout", "connection", "malformed", "auth", "not_found", "bad_request", "other"
]
RETRYABLE: frozenset[Reason] = frozenset({"rate_limited", "server_error", "timeout", "connection", "malformed"})
_RETRYABLE_STATUS = {408, 409, 429}


# -- options and policy ---------------------------------------------------------------


class RemoteOptions(BaseModel):
    """Options every remote model adapter accepts; adapters subclass this model."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    """Where the service listens, with its path prefix; each adapter has a default."""
    api_key: SecretStr | None = None
    """Sent as the adapter's credentials; each adapter names its environment fallback."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for a response (for a stream: between two pieces)."""
    max_retries: int = Field(default=4, ge=0)
    """Retries after a 429, a 5xx, a timeout or a lost connection (0: none)."""
    max_concurrency: int = Field(default=8, ge=1)
    """Calls this adapter has in flight at once, at most."""
    retry_initial_delay: float = Field(default=1.0, ge=0)
    """Seconds before the first retry; doubled for each further one."""
    retry_max_delay: float = Field(default=30.0, ge=0)
    """Ceiling of the backoff delay."""
    max_retry_after: float = Field(default=120.0, ge=0)
    """Longest ``Retry-After`` honoured; a longer one fails the call at once."""

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries,
            initial_delay=self.retry_initial_delay,
            max_delay=self.retry_max_delay,
            max_retry_after=self.max_retry_after,
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait before retry number ``retry`` (0 for the first)."""

    max_retries: int = 4
    initial_delay: float = 1.0
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    jitter: float = 0.5
    """Backoff delays are drawn from [base * (1 - jitter), base]."""

    def backoff(self, retry: int) -> float:
        base = min(self.max_delay, self.initial_delay * 2.0**retry)
        return base * (1.0 - self.jitter * random.random())

    def wait(self, retry: int, retry_after: float | None) -> float | None:
        """Seconds to sleep, or ``None`` when the server asks for too long a wait.

        A ``Retry-After`` is a minimum: a little jitter is added on top so that
        clients turned away together do not come back together.
        """
        if retry_after is None:
            return self.backoff(retry)
        if retry_after > self.max_retry_after:
            return None
        return retry_after + random.uniform(0.0, min(1.0, 0.1 * retry_after))


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


# -- the call runner ------------------------------------------------------------------


class ModelCalls:
    """Runs calls to one service under the retry policy and the concurrency limit.

    A call holds one of ``max_concurrency`` slots while it is in flight (a
    stream: until it ends or is closed) and gives it back while it waits to
    retry, so a throttled adapter never holds slots asleep.

    The retry loop is written out, not tenacity's or stamina's (a wrapper of
    tenacity): ``AsyncRetrying`` takes four times as long a call, and its hooks
    would restate the policy's bounds and ``Retry-After`` ceiling, so the code
    would not be smaller (``benchmarks/findings.md``).
    """

    def __init__(
        self,
        policy: RetryPolicy,
        service: Service,
        *,
        max_concurrency: int,
        timeouts: tuple[type[BaseException], ...] = (),
        connection_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.policy = policy
        self.service = service
        self.max_concurrency = max_concurrency
        self._errors = {"timeouts": timeouts, "connection_errors": connection_errors}
        # anyio's semaphore is not bound to the event loop it was first used on.
        self._slots = anyio.Semaphore(max_concurrency)
        self.retries = 0
        """Retries made so far, all calls together."""

    async def run(self, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` with retries; raises ``ModelError`` when giving up."""
        for attempt in range(1, self.policy.max_retries + 2):
            try:
                async with self._slots:
                    return await call()
            except ModelError:
                raise
            except Exception as exc:
                await self._pause_or_raise(exc, attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def stream(self, open_stream: Callable[[], Awaitable[AsyncIterator[T]]]) -> AsyncIterator[T]:
        """The items of ``await open_stream()``, retried until the first item
        arrives; a failure after that raises ``ModelError`` without a retry."""
        for attempt in range(1, self.policy.max_retries + 2):
            await self._slots.acquire()
            items: AsyncIterator[T] | None = None
            try:
                items = await open_stream()
                first = await anext(items)
            except BaseException as exc:  # cancellation too: the slot must come back
                self._slots.release()
                await close_items(items)
                if isinstance(exc, StopAsyncIteration):
                    return
                if isinstance(exc, ModelError) or not isinstance(exc, Exception):
                    raise
                await self._pause_or_raise(exc, attempt)
                continue
            try:
                yield first
                async for item in items:
                    yield item
            except ModelError:
                raise
            except Exception as exc:
                raise self._broken_stream(exc) from exc
            finally:
                self._slots.release()
                await close_items(items)
            return

    def error(self, problem: BaseException | Failure, attempts: int) -> ModelError:
        """The ``ModelError`` for an exception or failure: what failed and how to fix it."""
        failure = problem if isinstance(problem, Failure) else classify(problem, **self._errors)
        return ModelError(
            describe_failure(failure, self.service, attempts), public=describe_cause(failure, self.service, attempts)
        )

    def _broken_stream(self, exc: Exception) -> ModelError:
        failure = classify(exc, **self._errors)
        cause = f"HTTP {failure.status}" if failure.status else failure.reason.replace("_", " ")
        return ModelError(
            f"{self.service.label()} broke off a streamed answer ({cause}: {failure.detail}). "
            "It is not retried, because part of it was already handed out: ask again",
            public=f"{self.service.public_name()} broke off a streamed answer ({cause}); ask again",
        )

    async def _pause_or_raise(self, exc: Exception, attempt: int) -> None:
        failure = classify(exc, **self._errors)
        if not failure.retryable or attempt > self.policy.max_retries:
            raise self.error(failure, attempt) from exc
        wait = self.policy.wait(attempt - 1, failure.retry_after)
        if wait is None:
            raise ModelError(
                f"{self.service.label()} asks to retry after {failure.retry_after:.0f} s, more than "
                f"max_retry_after = {self.policy.max_retry_after:.0f} s (HTTP {failure.status}). "
                "Fix: check the account's quota, or raise max_retry_after",
                public=f"{self.service.public_name()} is rate limiting for longer than this server waits "
                f"(HTTP {failure.status})",
            ) from exc
        self.retries += 1
        await asyncio.sleep(wait)


# -- usage ----------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageRecord:
    """Tokens of one call, as the service reported them (0 when it did not)."""

    role: str
    input_tokens: int
    output_tokens: int


@dataclass
class UsageLog:
    """Token usage per call and per role (``ChatRequest.role``; embedders use
    ``"embedding"``, rerankers ``"rerank"``). Keeps the last ``keep`` calls
    and exact totals for all of them."""

    keep: int = 10_000
    calls: deque[UsageRecord] = field(init=False, repr=False)
    counts: Counter[str] = field(init=False, default_factory=Counter)
    _tokens: defaultdict[str, list[int]] = field(
        init=False, repr=False, default_factory=lambda: defaultdict(lambda: [0, 0])
    )

    def __post_init__(self) -> None:
        self.calls = deque(maxlen=self.keep)

    def record(self, role: str, input_tokens: int | None, output_tokens: int | None = 0) -> Usage:
        usage = Usage(input_tokens=max(0, input_tokens or 0), output_tokens=max(0, output_tokens or 0))
        self.calls.append(UsageRecord(role, usage.input_tokens, usage.output_tokens))
        self.counts[role] += 1
        totals = self._tokens[role]
        totals[0] += usage.input_tokens
        totals[1] += usage.output_tokens
        return usage

    def by_role(self) -> dict[str, Usage]:
        return {role: Usage(input_tokens=i, output_tokens=o) for role, (i, o) in self._tokens.items()}

    def total(self) -> Usage:
        roles = self.by_role().values()
        return Usage(
            input_tokens=sum(u.input_tokens for u in roles), output_tokens=sum(u.output_tokens for u in roles)
        )


# -- the adapter base -----------------------------------------------------------------


class RemoteModel(ModelAdapter):
    """Base of model adapters that call a service: resolves ``base_url`` and
    the API key, and owns the call runner (``self.calls``), the usage log
    (``self.usage``) and the client (``self.client()``, made on first use).

    A subclass sets the attributes below (per instance in ``configure``),
    implements ``new_client`` and ``client_errors`` (and ``close_client`` when
    the client has no ``async close()``), then sends every request through
    ``self.calls`` and records what the service reports in ``self.usage``.
    """

    section: ClassVar[str] = "llm"
    """The settings section it is configured in, for messages: llm, embedder, reranker."""
    service_name: str = "model service"
    default_url: str = ""
    url_env: str | None = None
    """Environment variable read when ``base_url`` is not set."""
    key_env: tuple[str, ...] = ()
    """Environment variables read, in order, when ``api_key`` is not set."""
    key_required_at_default_url: bool = False
    """A hosted service always needs a key: fail at construction without one."""
    options: RemoteOptions

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.configure()
        env_url = os.environ.get(self.url_env) if self.url_env else None
        self.base_url = (self.options.base_url or env_url or self.default_url).rstrip("/")
        self._api_key = secret_value(self.options.api_key, *self.key_env)
        if self._api_key is None and self.key_required_at_default_url and self.base_url == self.default_url:
            raise ConfigError(f"the {self.name} {self.section} adapter has no API key: {self.api_key_hint()}")
        timeouts, connection_errors = self.client_errors()
        self.usage = UsageLog()
        self.calls = ModelCalls(
            self.options.retry_policy(),
            self.service(),
            max_concurrency=self.options.max_concurrency,
            timeouts=timeouts,
            connection_errors=connection_errors,
        )
        self._client: tuple[Any, asyncio.AbstractEventLoop] | None = None

    def configure(self) -> None:
        """Called once the options are parsed, before anything is resolved:
        adjust the attributes above to the options here."""

    def api_key_hint(self) -> str:
        env = " or ".join(self.key_env) or "the service's key variable"
        return (
            f"set api_key in [{self.section}.options] (or RAGKIT_{self.section.upper()}__API_KEY) "
            f"or {env} to a key this server accepts"
        )

    def service(self) -> Service:
        return Service(
            self.service_name, self.base_url, self.model_name(), self.api_key_hint(), self.options.timeout,
            self.section,
        )

    def model_name(self) -> str:
        return str(getattr(self.options, "model", self.name))

    def client_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        """(timeout types, connection error types) of the client library."""
        return (), ()

    def new_client(self) -> Any:
        raise NotImplementedError

    async def close_client(self, client: Any) -> None:
        await client.close()

    def client(self) -> Any:
        """The client, made on first use; it belongs to the event loop it was made
        on, like its connections (``RAG`` runs every call on one loop)."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._client[1] is not loop:
            if not self._client[1].is_closed():
                raise RuntimeError(
                    f"the {self.name} {self.section} adapter is in use on another event loop, which its "
                    "HTTP connections belong to. Fix: use one adapter object per event loop, or "
                    "`await adapter.aclose()` on the first loop before using it on another"
                )
            self._client = None  # its loop has ended, and its connections with it
        if self._client is None:
            self._client = (self.new_client(), loop)
        return self._client[0]

    async def aclose(self) -> None:
        """Close the client; the adapter stays usable (the next call makes a new one)."""
        made, self._client = self._client, None
        if made is not None and not made[1].is_closed():  # else it went with its loop
            await self.close_client(made[0])


# -- helpers for options --------------------------------------------------------------


def secret_value(option: SecretStr | None, *env_names: str) -> str | None:
    """The option's secret, else the first set environment variable, else ``None``."""
    if option is not None and option.get_secret_value():
        return option.get_secret_value()
    return next((os.environ[n] for n in env_names if os.environ.get(n)), None)


def model_identity(provider: str, model: str, **outputs: Any) -> str:
    """A stable ``model_id``: ``provider:model``, plus a short digest of the
    options that change outputs when any is set (``temperature=0.2``...).
    Endpoints and secrets stay out of it, so moving a server keeps the cache."""
    relevant = {k: v for k, v in sorted(outputs.items()) if v not in (None, {}, [], ())}
    if not relevant:
        return f"{provider}:{model}"
    return f"{provider}:{model}#{digest(json.dumps(relevant, sort_keys=True, default=str))[:10]}"


# -- embeddings -----------------------------------------------------------------------


def embedding_dimension(provider: str, model: str, dimensions: int | None, known: Mapping[str, int]) -> int:
    """``dimensions`` if set, else the known length of ``model`` (a ``:tag`` ignored)."""
    dimension = dimensions or known.get(model) or known.get(model.split(":")[0])
    if dimension is None:
        raise ConfigError(
            f"the {provider} embedder does not know the vector length of model {model!r}: "
            "set dimensions in [embedder.options] (RAGKIT_EMBEDDER__DIMENSIONS)"
        )
    return dimension


async def embed_in_batches(
    texts: Sequence[str],
    batch_size: int,
    dimension: int,
    embed_batch: Callable[[list[str]], Awaitable[np.ndarray]],
) -> np.ndarray:
    """``embed_batch`` on slices of at most ``batch_size`` texts, run together
    (the adapter's ``ModelCalls`` limits how many are in flight), as one
    C-contiguous float32 matrix; no call at all for no texts."""
    texts = list(texts)
    if not texts:
        return np.zeros((0, dimension), dtype=np.float32)
    slices = [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]
    parts = await asyncio.gather(*(embed_batch(s) for s in slices))
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def check_vectors(rows: Any, expected: int, dimension: int, service: Service) -> np.ndarray:
    """The service's vectors as a float32 matrix, or a ``ModelError`` saying
    what is wrong with them (count, length, non-finite values)."""
    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != expected:
        raise service.bad_response(f"returned {len(matrix)} vectors for {expected} texts", "check the server")
    if matrix.shape[1] != dimension:
        raise service.bad_response(
            f"returned vectors of length {matrix.shape[1]}, but dimensions = {dimension}",
            f"set dimensions = {matrix.shape[1]} in [embedder.options] (a vector store built "
            "with another length must be rebuilt)",
        )
    if not np.isfinite(matrix).all():
        raise service.bad_response("returned vectors with NaN or infinite values")
    return matrix
