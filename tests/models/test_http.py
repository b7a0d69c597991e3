"""``ragkit.models.http``: the retry policy, failure classification, the call
runner and usage log that every remote model adapter shares. The adapters'
own tests (plugins/*/tests) run the same code through real client libraries
against loopback servers; these pin the rules themselves.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from types import SimpleNamespace

import pytest

from ragkit.errors import ConfigError, ModelError
from ragkit.models import (
    ModelCalls,
    RemoteModel,
    RemoteOptions,
    RetryPolicy,
    Service,
    UsageLog,
    classify,
    describe_failure,
    embedding_dimension,
    model_identity,
    parse_retry_after,
    without_credentials,
)

SERVICE = Service("Test server", "http://user:pw@127.0.0.1:9/v1", "m", "set api_key", timeout=5)


class HTTPFailure(Exception):
    """Shaped like httpx.HTTPStatusError / openai.APIStatusError."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.response = SimpleNamespace(status_code=status, headers=headers or {})


def calls(max_retries: int = 2, max_concurrency: int = 4) -> ModelCalls:
    policy = RetryPolicy(max_retries=max_retries, initial_delay=0.001, max_delay=0.002)
    return ModelCalls(policy, SERVICE, max_concurrency=max_concurrency)


# -- classification -----------------------------------------------------------------------


def test_retry_after_in_seconds_milliseconds_and_http_dates():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after({"retry-after": soon}) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after(None) is None


@pytest.mark.parametrize(
    ("status", "reason", "retryable"),
    [
        (429, "rate_limited", True),
        (500, "server_error", True),
        (503, "server_error", True),
        (408, "server_error", True),
        (401, "auth", False),
        (403, "auth", False),
        (404, "not_found", False),
        (400, "bad_request", False),
        (422, "bad_request", False),
    ],
)
def test_http_statuses(status, reason, retryable):
    failure = classify(HTTPFailure(status))
    assert (failure.reason, failure.status, failure.retryable) == (reason, status, retryable)


def test_status_and_headers_are_found_along_the_exception_chain():
    """Clients re-raise HTTP errors as their own type (ollama: `from None`,
    which keeps __context__)."""
    try:
        try:
            raise HTTPFailure(503, {"retry-after": "3"})
        except HTTPFailure:
            raise RuntimeError("service unavailable") from None
    except RuntimeError as exc:
        failure = classify(exc)
    assert (failure.reason, failure.status, failure.retry_after) == ("server_error", 503, 3.0)


def test_timeouts_and_connection_errors():
    class ClientTimeout(Exception):
        pass

    assert classify(ClientTimeout(), timeouts=(ClientTimeout,)).reason == "timeout"
    assert classify(TimeoutError()).reason == "timeout"
    assert classify(ConnectionRefusedError()).reason == "connection"
    assert classify(ValueError("bad json")).reason == "other"
    assert not classify(ValueError()).retryable


def test_messages_name_the_fix_and_hide_url_credentials():
    message = describe_failure(classify(HTTPFailure(401)), SERVICE, 1)
    assert "refused the credentials" in message and "Fix: set api_key" in message
    assert "pw" not in message and "127.0.0.1:9/v1" in message
    assert without_credentials("https://a:b@host/x") == "https://host/x"


class Echoed(Exception):
    """A failure whose text is the server's own words, URL and all."""

    def __init__(self, status: int | None = None) -> None:
        super().__init__("upstream says: key zq81-plain-secret rejected at http://10.0.0.7:8000/v1")
        if status is not None:
            self.response = SimpleNamespace(status_code=status, headers={})


@pytest.mark.parametrize(
    ("problem", "cause"),
    [
        (Echoed(401), "the LLM server refused the credentials (HTTP 401)"),
        (Echoed(404), "the LLM server does not know the model or the path (HTTP 404)"),
        (Echoed(400), "the LLM server rejected the request (HTTP 400)"),
        (Echoed(429), "the LLM server was still rate limiting after 3 attempts (HTTP 429)"),
        (Echoed(503), "the LLM server failed after 3 attempts (HTTP 503)"),
        (TimeoutError("http://10.0.0.7:8000 timed out"), "the LLM server did not answer within 5 s after 3 attempts"),
        (ConnectionError("[Errno 111] http://10.0.0.7:8000"), "cannot connect to the LLM server after 3 attempts"),
        (Echoed(), "the call to the LLM server failed after 3 attempts"),
    ],
)
def test_a_model_error_carries_a_public_cause_without_the_url_or_the_servers_words(problem, cause):
    """``str(error)`` keeps the whole story for the CLI and the log; ``public``
    (what ``ragkit serve`` shows a client) is ragkit's words only."""
    service = Service("Test server", "http://10.0.0.7:8000/v1", "m", "set api_key", timeout=5, section="llm")
    error = ModelCalls(RetryPolicy(max_retries=2), service, max_concurrency=1).error(problem, 3)
    assert error.public == cause
    assert "10.0.0.7:8000" in str(error)
    if not isinstance(problem, (TimeoutError, ConnectionError)):
        assert "upstream says" in str(error)


def test_a_bad_response_is_public_and_a_bare_model_error_says_only_that_a_call_failed():
    service = Service("OpenAI", "http://10.0.0.7/v1", "e", section="embedder")
    error = service.bad_response("returned 2 vectors for 3 texts", "check the server")
    assert error.public == "the embedding server returned 2 vectors for 3 texts"
    assert str(error).startswith("OpenAI at http://10.0.0.7/v1") and str(error).endswith("Fix: check the server")
    assert ModelError("model at http://10.0.0.7 said: secret").public == "a model call failed"


# -- policy -------------------------------------------------------------------------------


def test_backoff_grows_exponentially_with_jitter_and_a_ceiling():
    policy = RetryPolicy(initial_delay=1.0, max_delay=8.0, jitter=0.5)
    for retry, base in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 8.0)]:
        delays = [policy.backoff(retry) for _ in range(200)]
        assert all(base / 2 <= d <= base for d in delays) and len(set(delays)) > 1


def test_retry_after_is_a_minimum_and_has_a_ceiling():
    policy = RetryPolicy(max_retry_after=60)
    assert all(10.0 <= policy.wait(0, 10.0) <= 11.0 for _ in range(50))
    assert policy.wait(0, 61.0) is None


def test_options_build_the_policy_and_reject_typos():
    opts = RemoteOptions(max_retries=1, retry_initial_delay=0.5, retry_max_delay=4, max_retry_after=9)
    assert opts.retry_policy() == RetryPolicy(1, 0.5, 4.0, 9.0)
    with pytest.raises(ValueError):
        RemoteOptions(max_retrys=1)


# -- the runner ---------------------------------------------------------------------------


async def test_run_retries_then_succeeds_and_counts_retries():
    outcomes = [HTTPFailure(500), HTTPFailure(429, {"retry-after": "0"}), "ok"]

    async def call():
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    runner = calls()
    assert await runner.run(call) == "ok" and runner.retries == 2


async def test_run_gives_up_with_the_attempt_count():
    attempts = 0

    async def call():
        nonlocal attempts
        attempts += 1
        raise HTTPFailure(502)

    with pytest.raises(ModelError, match="after 3 attempts .*HTTP 502"):
        await calls(max_retries=2).run(call)
    assert attempts == 3


async def test_model_errors_pass_through_unretried():
    attempts = 0

    async def call():
        nonlocal attempts
        attempts += 1
        raise ModelError("bad answer")

    with pytest.raises(ModelError, match="^bad answer$"):
        await calls().run(call)
    assert attempts == 1


async def peak_in_flight(runner, n: int, seconds: float) -> int:
    """The most of ``n`` concurrent ``runner.run`` calls that were in flight at once."""
    active = peak = 0

    async def call():
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(seconds)
        active -= 1

    await asyncio.gather(*(runner.run(call) for _ in range(n)))
    return peak


async def test_concurrency_limit():
    assert await peak_in_flight(calls(max_concurrency=3), 10, 0.01) == 3


def stream_of(*items, fail_after: int | None = None, opened: list | None = None):
    async def open_stream():
        if opened is not None:
            opened.append(1)

        async def gen():
            for i, item in enumerate(items):
                if fail_after is not None and i == fail_after:
                    raise HTTPFailure(500)
                yield item

        return gen()

    return open_stream


async def test_stream_is_retried_only_before_its_first_item():
    opened: list = []
    failing_first = iter([True, False])

    async def open_stream():
        opened.append(1)
        if next(failing_first):
            raise HTTPFailure(503)
        return await stream_of("a", "b")()

    runner = calls()
    assert [x async for x in runner.stream(open_stream)] == ["a", "b"] and len(opened) == 2

    opened.clear()
    out = []
    with pytest.raises(ModelError, match=r"broke off a streamed answer \(HTTP 500"):
        async for x in runner.stream(stream_of("a", "b", "c", fail_after=2, opened=opened)):
            out.append(x)
    assert out == ["a", "b"] and len(opened) == 1  # text already handed out: no retry


async def test_a_stream_left_early_gives_its_slot_back():
    runner = calls(max_concurrency=1)
    async for _ in runner.stream(stream_of("a", "b", "c")):
        break
    await asyncio.sleep(0)  # let the abandoned generator be finalised
    out = await asyncio.wait_for(runner.run(lambda: asyncio.sleep(0, "free")), 1)
    assert out == "free"


def test_the_concurrency_limit_is_not_bound_to_one_event_loop():
    """A limit saturated in one loop, then in another: asyncio's own semaphore
    would raise "bound to a different event loop" in the second."""
    runner = calls(max_concurrency=2)
    peaks = [asyncio.run(peak_in_flight(runner, 6, 0.005)) for _ in range(2)]
    assert peaks == [2, 2]


class Client:
    closed = False

    async def close(self) -> None:
        self.closed = True


class Remote(RemoteModel):
    name = "test"
    Options = RemoteOptions

    def new_client(self) -> Client:
        return Client()


def test_a_client_belongs_to_the_loop_it_was_made_on():
    """One client per adapter; a loop that has ended takes its client along,
    aclose() closes it, and a second live loop gets an error naming the fix."""
    model = Remote()

    async def client() -> Client:
        return model.client()

    first = asyncio.run(client())
    second = asyncio.run(client())  # the first loop has ended: a new client
    assert first is not second and not first.closed

    async def same_loop_twice_then_close() -> tuple[bool, bool]:
        same = model.client() is model.client()
        made = model.client()
        await model.aclose()
        return same, made.closed

    assert asyncio.run(same_loop_twice_then_close()) == (True, True)

    async def from_another_live_loop() -> None:
        await asyncio.to_thread(asyncio.run, client())

    async def hold_and_use_elsewhere() -> None:
        model.client()
        await from_another_live_loop()

    with pytest.raises(RuntimeError, match="in use on another event loop.*aclose"):
        asyncio.run(hold_and_use_elsewhere())


# -- usage and identity ---------------------------------------------------------------------


def test_usage_per_call_and_per_role():
    log = UsageLog(keep=2)
    log.record("extraction", 10, 5)
    log.record("extraction", 3, None)
    log.record("answer", 7, 1)
    assert log.by_role()["extraction"].input_tokens == 13 and log.by_role()["extraction"].output_tokens == 5
    assert log.total().input_tokens == 20 and log.counts == {"extraction": 2, "answer": 1}
    assert [c.role for c in log.calls] == ["extraction", "answer"]  # only the last `keep` calls


def test_model_identity_and_embedding_dimension():
    assert model_identity("p", "m") == "p:m" == model_identity("p", "m", temperature=None, extra={})
    assert model_identity("p", "m", temperature=0.2) != model_identity("p", "m", temperature=0.3)
    assert embedding_dimension("p", "nomic:latest", None, {"nomic": 768}) == 768
    with pytest.raises(ConfigError, match="set dimensions"):
        embedding_dimension("p", "other", None, {})
