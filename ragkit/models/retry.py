"""The retry policy and the call runner every remote model adapter sends its
requests through: retries with backoff and ``Retry-After``, and a limit on
calls in flight."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from ragkit._loop_thread import close_items
from ragkit.errors import ModelError
from ragkit.models.failures import Failure, Service, classify, describe_cause, describe_failure

T = TypeVar("T")


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

