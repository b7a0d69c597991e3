"""The openai adapters through the real ``openai`` client against
``OpenAIServer`` on 127.0.0.1. Every timing is read from the server's own
records; no client code is patched.

Troubleshoot: ``server.requests`` lists what reached the server (path, query,
headers, JSON body, monotonic times); print it when an assertion fails.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ragkit.errors import ConfigError, ModelError
from ragkit.protocols.models import ChatRequest, Message
from ragkit.testing.http_server import (
    CannedServer,
    check_refused_stream_records_no_call,
    count_tokens,
    fake_answer,
    fake_embedding,
)
from ragkit_openai import OpenAIChat, OpenAIEmbedder
from ragkit_openai.testing import TEST_KEY, OpenAIServer

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}


@pytest.fixture
def server():
    with OpenAIServer(api_key=TEST_KEY) as s:
        yield s


def chat(server: OpenAIServer, **options) -> OpenAIChat:
    return OpenAIChat({"base_url": server.url, "api_key": TEST_KEY, "model": "fake-chat", **FAST, **options})


def embedder(server: OpenAIServer, **options) -> OpenAIEmbedder:
    base = {"base_url": server.url, "api_key": TEST_KEY, "model": "local-embed", "dimensions": 32}
    return OpenAIEmbedder({**base, **FAST, **options})


REQUEST = ChatRequest(prompt="Name one renewable energy source.", system="Be terse.", role="answer")


# -- chat ---------------------------------------------------------------------------------


async def test_complete_sends_openai_messages_and_returns_the_server_text(server):
    """The request carries ChatRequest.messages(); the answer is the server's.
    Troubleshoot: compare server.requests[0].body with ChatRequest.messages()."""
    req = ChatRequest(
        prompt="hi there", system="sys", history=(Message(role="user", content="a"),), max_tokens=50
    )
    out = await chat(server).complete(req)
    body = server.bodies("/chat/completions")[0]
    assert body["messages"] == req.messages()
    assert body["max_tokens"] == 50 and "temperature" not in body
    assert out.text == fake_answer(req.messages(), max_tokens=50)


async def test_usage_is_recorded_per_call_and_per_role(server):
    """Token counts come from the API's usage and add up per ChatRequest.role."""
    llm = chat(server)
    roles = ["extraction", "extraction", "summary", "keywords", "answer"]
    outs = [await llm.complete(REQUEST.model_copy(update={"role": r})) for r in roles]
    prompt_tokens = count_tokens(*(m["content"] for m in REQUEST.messages()))
    assert all(o.usage.input_tokens == prompt_tokens for o in outs)
    by_role = llm.usage.by_role()
    assert by_role["extraction"].input_tokens == 2 * prompt_tokens
    assert by_role["extraction"].output_tokens == 2 * count_tokens(outs[0].text)
    assert set(by_role) == {"extraction", "summary", "keywords", "answer"}
    assert [c.role for c in llm.usage.calls] == roles
    assert llm.usage.counts["extraction"] == 2
    assert llm.usage.total().input_tokens == 5 * prompt_tokens


async def test_stream_equals_complete_and_records_usage(server):
    """Joined stream pieces equal complete()'s text; the stream asks for the
    usage chunk and its counts are recorded under the request's role."""
    llm = chat(server)
    whole = await llm.complete(REQUEST)
    pieces = [p async for p in llm.stream(REQUEST.model_copy(update={"role": "summary"}))]
    assert len(pieces) > 1 and "".join(pieces) == whole.text
    body = server.bodies("/chat/completions")[1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert llm.usage.by_role()["summary"] == whole.usage


async def test_stream_usage_can_be_turned_off(server):
    llm = chat(server, stream_usage=False)
    text = "".join([p async for p in llm.stream(REQUEST)])
    assert text and "stream_options" not in server.bodies("/chat/completions")[0]
    assert llm.usage.by_role()["answer"].input_tokens == 0  # the server sent no usage
    assert llm.usage.by_role()["answer"].output_tokens == 0 and len(llm.usage.calls) == 1


async def test_a_stream_refused_before_its_first_piece_records_no_call(server):
    await check_refused_stream_records_no_call(chat(server), server, REQUEST)


def _completion(choices: list, **extra) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": choices, **extra}


async def test_an_answer_without_choices_is_named():
    with CannedServer("/v1", path="/chat/completions") as canned:
        canned.answer(_completion([]))
        llm = OpenAIChat({"base_url": canned.url, "api_key": TEST_KEY, "model": "m", "max_retries": 0})
        with pytest.raises(ModelError, match=r"\banswered with no choices\b.*\bcheck the server's logs\b"):
            await llm.complete(REQUEST)


async def test_no_content_and_no_usage_are_an_empty_answer_of_no_tokens():
    """A message whose content is null (a refusal, a tool call) and a server
    that reports no usage."""
    with CannedServer("/v1", path="/chat/completions") as canned:
        message = {"role": "assistant", "content": None}
        canned.answer(_completion([{"index": 0, "message": message, "finish_reason": "stop"}]))
        llm = OpenAIChat({"base_url": canned.url, "api_key": TEST_KEY, "model": "m", "max_retries": 0})
        out = await llm.complete(REQUEST)
    assert out.text == "" and (out.usage.input_tokens, out.usage.output_tokens) == (0, 0)
    assert len(llm.usage.calls) == 1


async def test_json_mode_sends_response_format(server):
    out = await chat(server).complete(ChatRequest(prompt="answer in JSON", json_mode=True))
    assert server.bodies("/chat/completions")[0]["response_format"] == {"type": "json_object"}
    assert out.text.startswith("{")


async def test_options_reach_the_request(server):
    """temperature (default and per request), max_completion_tokens and
    extra_body are sent as the server expects them."""
    llm = chat(server, temperature=0.3, max_tokens_param="max_completion_tokens", extra_body={"top_k": 5})
    await llm.complete(ChatRequest(prompt="x", max_tokens=7))
    await llm.complete(ChatRequest(prompt="x", temperature=0.0))
    first, second = server.bodies("/chat/completions")
    assert first["temperature"] == 0.3 and first["max_completion_tokens"] == 7 and "max_tokens" not in first
    assert first["top_k"] == 5 and second["temperature"] == 0.0


async def test_model_id_names_model_and_output_options_only(server):
    assert chat(server).model_id == "openai:fake-chat"
    warm = chat(server, temperature=0.7)
    assert warm.model_id.startswith("openai:fake-chat#") and warm.model_id != chat(server).model_id
    assert TEST_KEY not in warm.model_id and TEST_KEY not in repr(warm.options)


# -- retries ------------------------------------------------------------------------------


async def test_retry_after_is_honoured(server):
    """After a 429 with Retry-After: 1 the retry arrives at least 1 s after the
    429 left the server (backoff alone would be ~0.01 s here)."""
    server.fail(429, retry_after=1)
    llm = chat(server)
    out = await llm.complete(REQUEST)
    first, second = server.requests
    assert first.status == 429 and second.status == 200 and out.text
    assert second.started - first.answered >= 1.0
    assert llm.calls.retries == 1


async def test_retry_after_ms_header_is_honoured(server):
    server.fail(429, headers={"retry-after-ms": "600"})
    await chat(server).complete(REQUEST)
    first, second = server.requests
    assert second.started - first.answered >= 0.6


async def test_retry_after_longer_than_max_retry_after_fails_at_once(server):
    server.fail(429, retry_after=3600)
    with pytest.raises(ModelError, match=r"retry after 3600 s.*max_retry_after"):
        await chat(server, max_retry_after=10).complete(REQUEST)
    assert len(server.requests) == 1


async def test_server_errors_are_retried_with_backoff(server):
    """Two 500s then success: three requests, growing gaps (exponential)."""
    server.fail(500, times=2)
    llm = chat(server, retry_initial_delay=0.2, retry_max_delay=5)
    await llm.complete(REQUEST)
    a, b, c = server.requests
    assert [r.status for r in (a, b, c)] == [500, 500, 200]
    assert b.started - a.answered >= 0.1 and c.started - b.answered >= 0.2  # jitter keeps >= half


async def test_gives_up_after_max_retries_with_a_clear_error(server):
    server.fail(503, times=10)
    with pytest.raises(ModelError) as info:
        await chat(server, max_retries=2).complete(REQUEST)
    message = str(info.value)
    assert "after 3 attempts" in message and "HTTP 503" in message and "max_retries" in message
    assert server.url in message and "fake-chat" in message
    assert len(server.requests) == 3


async def test_timeouts_are_retried(server):
    """A response slower than `timeout` is abandoned and retried."""
    server.fail(None, delay=1.5)
    out = await chat(server, timeout=0.4).complete(REQUEST)
    assert out.text and len(server.requests) == 2


async def test_timeout_error_names_the_timeout(server):
    server.fail(None, delay=1.5, times=2)
    with pytest.raises(ModelError, match=r"timeout = 0.3 s after 2 attempts.*raise timeout"):
        await chat(server, timeout=0.3, max_retries=1).complete(REQUEST)


async def test_stream_is_retried_before_its_first_piece(server):
    server.fail(429, retry_after=0.2)
    llm = chat(server)
    text = "".join([p async for p in llm.stream(REQUEST)])
    assert text == fake_answer(REQUEST.messages()) and len(server.requests) == 2


async def test_connection_refused_is_a_model_error(server):
    url = server.url
    server.stop()
    with pytest.raises(ModelError, match=r"cannot connect to .*after 2 attempts.*server is running"):
        await OpenAIChat({"base_url": url, "api_key": "k", "max_retries": 1, **FAST}).complete(REQUEST)


# -- errors and credentials ----------------------------------------------------------------


async def test_401_names_the_api_key_and_never_prints_it(server):
    wrong = "sk-wrong-secret-123"
    with pytest.raises(ModelError) as info:
        await chat(server, api_key=wrong).complete(REQUEST)
    message = str(info.value)
    assert "HTTP 401" in message and "api_key" in message and "OPENAI_API_KEY" in message
    assert wrong not in message and TEST_KEY not in message
    assert len(server.requests) == 1  # not retried


async def test_api_key_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    llm = OpenAIChat({"base_url": server.url, "model": "fake-chat"})
    assert (await llm.complete(REQUEST)).text
    assert server.requests[0].headers["authorization"] == f"Bearer {TEST_KEY}"


def test_no_key_for_openai_itself_is_a_config_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChat({})


def test_unknown_options_are_rejected():
    with pytest.raises(ConfigError, match="tempreature"):
        OpenAIChat({"tempreature": 0.1, "api_key": "k"})


async def test_unknown_model_is_a_404_naming_model_and_base_url():
    with OpenAIServer(api_key=TEST_KEY, models={"gpt-real"}) as s:
        with pytest.raises(ModelError, match=r"HTTP 404.*does not exist.*model name.*base_url"):
            await chat(s, model="gpt-typo").complete(REQUEST)
        assert len(s.requests) == 1


# -- endpoints ----------------------------------------------------------------------------


async def test_base_url_with_a_custom_path_prefix():
    """base_url carries the server's whole prefix: /custom/openai works, /v1 is a 404."""
    with OpenAIServer("/custom/openai", api_key=TEST_KEY) as s:
        assert (await chat(s).complete(REQUEST)).text
        assert s.requests[0].path == "/custom/openai/chat/completions"
        with pytest.raises(ModelError, match=r"HTTP 404.*base_url"):
            await OpenAIChat({"base_url": s.root + "/v1", "api_key": TEST_KEY, **FAST}).complete(REQUEST)


async def test_azure_deployment_with_api_version():
    """api_version switches to Azure: /openai/deployments/<model>/...?api-version=, api-key header."""
    with OpenAIServer("/openai/deployments/prod-4o", api_key="azure-key", azure=True) as s:
        llm = OpenAIChat(
            {"base_url": s.root, "api_key": "azure-key", "api_version": "2024-10-21", "model": "prod-4o"}
        )
        assert (await llm.complete(REQUEST)).text
        request = s.requests[0]
        assert request.query["api-version"] == "2024-10-21" and request.headers["api-key"] == "azure-key"


def azure(server: OpenAIServer, **options) -> OpenAIChat:
    return OpenAIChat({"base_url": server.root, "api_version": "2024-10-21", "model": "prod-4o", **FAST, **options})


async def test_azure_key_from_the_environment_prefers_the_azure_variable(monkeypatch):
    """With api_version, AZURE_OPENAI_API_KEY is read first, OPENAI_API_KEY second."""
    with OpenAIServer("/openai/deployments/prod-4o", api_key="azure-key", azure=True) as s:
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
        monkeypatch.setenv("OPENAI_API_KEY", "the-openai-key")
        assert (await azure(s).complete(REQUEST)).text
        monkeypatch.delenv("AZURE_OPENAI_API_KEY")
        monkeypatch.setenv("OPENAI_API_KEY", "azure-key")
        assert (await azure(s).complete(REQUEST)).text
        assert [r.headers["api-key"] for r in s.requests] == ["azure-key", "azure-key"]


async def test_azure_401_names_azure_and_both_key_variables(monkeypatch):
    """An Azure deployment's errors say whom they came from and which variables give the key."""
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIServer("/openai/deployments/prod-4o", api_key="azure-key", azure=True) as s:
        root = s.root
        with pytest.raises(ModelError) as info:
            await azure(s, api_key="sk-wrong-secret-123").complete(REQUEST)
    message = str(info.value)
    assert message.startswith(f"Azure OpenAI at {root} (model 'prod-4o') refused") and "HTTP 401" in message
    assert "AZURE_OPENAI_API_KEY or OPENAI_API_KEY" in message and "sk-wrong-secret-123" not in message


async def test_concurrency_limit_is_respected():
    """max_concurrency=2: never more than 2 requests in flight at the server."""
    with OpenAIServer(api_key=TEST_KEY, latency=0.2) as s:
        llm = chat(s, max_concurrency=2)
        await asyncio.gather(*(llm.complete(REQUEST) for _ in range(6)))
        assert s.max_in_flight == 2 and len(s.requests) == 6


def test_one_adapter_across_event_loops(server):
    """Clients and semaphores are per event loop: asyncio.run twice works."""
    llm = chat(server)
    for _ in range(2):
        assert asyncio.run(llm.complete(REQUEST)).text


# -- embeddings ---------------------------------------------------------------------------


async def test_embeddings_are_float32_rows_in_order(server):
    texts = ["solar power", "", "wind 🌬️ 风"]
    out = await embedder(server).embed(texts)
    assert out.dtype == np.float32 and out.shape == (3, 32) and out.flags["C_CONTIGUOUS"]
    assert np.allclose(out[0], fake_embedding("solar power", 32), atol=1e-6)
    body = server.bodies("/embeddings")[0]
    assert body["input"] == ["solar power", " ", "wind 🌬️ 风"] and body["encoding_format"] == "float"
    assert "dimensions" not in body  # not a text-embedding-3 model


async def test_batching_splits_at_max_batch_size(server):
    emb = embedder(server, batch_size=2)
    texts = [f"text number {i}" for i in range(5)]
    out = await emb.embed(texts)
    assert emb.max_batch_size == 2
    assert sorted(len(b["input"]) for b in server.bodies("/embeddings")) == [1, 2, 2]
    singles = np.concatenate([await emb.embed([t]) for t in texts])
    assert np.array_equal(out, singles)
    assert emb.usage.by_role()["embedding"].input_tokens == 2 * count_tokens(*texts)


async def test_dimensions_are_sent_to_text_embedding_3(server):
    emb = embedder(server, model="text-embedding-3-large", dimensions=256)
    assert (await emb.embed(["a"])).shape == (1, 256)
    assert server.bodies("/embeddings")[0]["dimensions"] == 256
    assert emb.model_id == "openai:text-embedding-3-large:256"


async def test_wrong_dimensions_say_which_to_set(server):
    with pytest.raises(ModelError, match=r"length 32, but dimensions = 48.*set dimensions = 32"):
        await embedder(server, dimensions=48).embed(["a"])


async def test_embedding_options_reach_the_request(server):
    """extra_body reaches the body; dimensions are sent when asked, or by
    default to text-embedding-3 models only."""
    await embedder(server, extra_body={"user": "u1"}).embed(["x"])
    await embedder(server, send_dimensions=True).embed(["x"])
    await embedder(server, model="text-embedding-3-small", send_dimensions=False).embed(["x"])
    await embedder(server, model="text-embedding-3-small").embed(["x"])
    bodies = server.bodies("/embeddings")
    assert bodies[0]["user"] == "u1" and "dimensions" not in bodies[0]
    assert [b.get("dimensions") for b in bodies[1:]] == [32, None, 32]


async def test_embeddings_without_usage_count_no_tokens():
    reply = {"object": "list", "model": "m", "data": [{"object": "embedding", "index": 0, "embedding": [0.5] * 4}]}
    with CannedServer("/v1", path="/embeddings") as canned:
        canned.answer(reply)
        emb = OpenAIEmbedder({"base_url": canned.url, "api_key": TEST_KEY, "model": "m", "dimensions": 4,
                              "max_retries": 0})
        await emb.embed(["x"])
    assert emb.usage.by_role()["embedding"].input_tokens == 0


def test_unknown_embedding_model_needs_dimensions():
    with pytest.raises(ConfigError, match="the openai embedder does not know .*set dimensions"):
        OpenAIEmbedder({"model": "bge-m3", "base_url": "http://127.0.0.1:1/v1"})


async def test_a_stream_cut_after_its_first_pieces_is_not_retried(server):
    """Pieces already handed out cannot be taken back: a connection lost
    mid-stream is a ModelError, with no second request."""
    server.fail(None, cut_after=3)
    received = []
    with pytest.raises(ModelError, match="fake-chat.*broke off a streamed answer.*not retried"):
        async for piece in chat(server).stream(REQUEST):
            received.append(piece)
    assert received and len(server.requests) == 1


def test_registered_through_the_entry_point():
    """Troubleshoot: `pip install -e plugins/ragkit-openai`, then `ragkit plugins`."""
    from ragkit.plugins import get_registry

    registry = get_registry()
    assert registry.get("llm", "openai") is OpenAIChat
    assert registry.get("embedder", "openai") is OpenAIEmbedder


async def test_a_malformed_body_is_retried_then_named(server):
    """A 200 carrying a proxy's HTML page: retried like a 5xx; if it persists,
    the error names the endpoint and says to check base_url."""
    server.fail(None, malformed=b"<html>502 Bad Gateway</html>")
    assert (await chat(server).complete(REQUEST)).text and len(server.requests) == 2
    server.reset()
    server.fail(None, malformed=b"<html>502 Bad Gateway</html>", times=5)
    with pytest.raises(ModelError, match=r"not valid API JSON after 3 attempts.*check that base_url"):
        await chat(server, max_retries=2).complete(REQUEST)
    assert len(server.requests) == 3
