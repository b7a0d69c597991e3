"""The ollama adapters through the real ``ollama`` client against
``OllamaServer`` on 127.0.0.1. Timings come from the server's own records;
no client code is patched.

Troubleshoot: ``server.requests`` lists what reached the server (path,
headers, JSON body, monotonic times); print it when an assertion fails.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragkit.errors import ConfigError, ModelError
from ragkit.protocols.models import ChatRequest
from ragkit.testing.http_server import (
    CannedServer,
    check_refused_stream_records_no_call,
    count_tokens,
    fake_answer,
    fake_embedding,
)
from ragkit_ollama import OllamaChat, OllamaEmbedder, ThinkFilter, strip_think
from ragkit_ollama.testing import THINKING, OllamaServer

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
REQUEST = ChatRequest(prompt="Name one renewable energy source.", system="Be terse.", role="answer")


@pytest.fixture
def server():
    with OllamaServer() as s:
        yield s


def chat(server: OllamaServer, **options) -> OllamaChat:
    return OllamaChat({"base_url": server.url, "model": "fake-chat", **FAST, **options})


def embedder(server: OllamaServer, **options) -> OllamaEmbedder:
    return OllamaEmbedder(
        {"base_url": server.url, "model": "fake-embed", "dimensions": 32, **FAST, **options}
    )


# -- chat ---------------------------------------------------------------------------------


async def test_complete_sends_messages_and_model_options(server):
    """messages, options (num_ctx, temperature, num_predict, extras), format and
    keep_alive reach /api/chat as Ollama expects them."""
    llm = chat(server, num_ctx=8192, temperature=0.2, keep_alive="30m", model_options={"seed": 7})
    out = await llm.complete(REQUEST.model_copy(update={"max_tokens": 40, "json_mode": True}))
    body = server.bodies("/api/chat")[0]
    assert body["messages"] == REQUEST.messages() and body["stream"] is False
    assert body["options"] == {"seed": 7, "num_ctx": 8192, "temperature": 0.2, "num_predict": 40}
    assert body["format"] == "json" and body["keep_alive"] == "30m" and "think" not in body
    assert out.text == fake_answer(REQUEST.messages(), json_mode=True, max_tokens=40)


async def test_usage_is_recorded_per_role(server):
    llm = chat(server)
    for role in ("extraction", "extraction", "keywords"):
        await llm.complete(REQUEST.model_copy(update={"role": role}))
    prompt = count_tokens(*(m["content"] for m in REQUEST.messages()))
    by_role = llm.usage.by_role()
    assert by_role["extraction"].input_tokens == 2 * prompt and by_role["keywords"].input_tokens == prompt
    assert by_role["keywords"].output_tokens == count_tokens(fake_answer(REQUEST.messages()))
    assert llm.usage.counts == {"extraction": 2, "keywords": 1}


async def test_stream_equals_complete_and_records_usage(server):
    llm = chat(server)
    whole = await llm.complete(REQUEST)
    pieces = [p async for p in llm.stream(REQUEST.model_copy(update={"role": "summary"}))]
    assert len(pieces) > 1 and "".join(pieces) == whole.text
    assert server.bodies("/api/chat")[1]["stream"] is True
    assert llm.usage.by_role()["summary"] == whole.usage


async def test_think_false_is_sent_and_think_tags_are_stripped():
    """think=false reaches the server; a server that still sends <think> blocks
    has them removed, from complete() and from the stream alike."""
    with OllamaServer(think_tags=True) as s:
        llm = chat(s, think=False)
        whole = await llm.complete(REQUEST)
        streamed = "".join([p async for p in llm.stream(REQUEST)])
        assert [b["think"] for b in s.bodies("/api/chat")] == [False, False]
        assert whole.text == streamed == fake_answer(REQUEST.messages())
        assert "<think>" not in whole.text


async def test_think_tags_kept_when_strip_think_is_off():
    with OllamaServer(think_tags=True) as s:
        llm = chat(s, strip_think=False)
        out = await llm.complete(REQUEST)
        assert out.text.startswith(THINKING)
        assert "".join([p async for p in llm.stream(REQUEST)]) == out.text


async def test_a_stream_refused_before_its_first_piece_records_no_call(server):
    await check_refused_stream_records_no_call(chat(server), server, REQUEST)


async def test_a_request_temperature_overrides_the_configured_one(server):
    llm = chat(server, temperature=0.7)
    await llm.complete(REQUEST.model_copy(update={"temperature": 0.0}))
    await llm.complete(REQUEST)
    assert [b["options"]["temperature"] for b in server.bodies("/api/chat")] == [0.0, 0.7]


async def test_null_content_is_an_empty_answer():
    """A message without content (a model that only called a tool)."""
    reply = {"model": "m", "created_at": "2024-01-01T00:00:00Z", "done": True,
             "message": {"role": "assistant", "content": None}, "prompt_eval_count": 3, "eval_count": 0}
    with CannedServer(path="/api/chat") as canned:
        canned.answer(reply)
        out = await OllamaChat({"base_url": canned.url, "model": "m", "max_retries": 0}).complete(REQUEST)
    assert out.text == "" and (out.usage.input_tokens, out.usage.output_tokens) == (3, 0)


async def test_thinking_field_never_reaches_the_answer(server):
    """With think=true the server fills message.thinking; the answer is content only."""
    llm = chat(server, think=True)
    assert (await llm.complete(REQUEST)).text == fake_answer(REQUEST.messages())
    assert "".join([p async for p in llm.stream(REQUEST)]) == fake_answer(REQUEST.messages())


def test_model_id_changes_with_output_options(server):
    assert chat(server).model_id == "ollama:fake-chat"
    ids = {
        chat(server, **o).model_id
        for o in ({}, {"think": False}, {"num_ctx": 8192}, {"strip_think": False}, {"temperature": 0.3})
    }
    assert len(ids) == 5


# -- retries and errors ---------------------------------------------------------------------


async def test_retry_after_is_honoured(server):
    """A 503 with Retry-After: 1 (a busy Ollama) is retried no sooner than 1 s
    later, read from the HTTP error that the ollama client wraps."""
    server.fail(503, retry_after=1)
    await chat(server).complete(REQUEST)
    first, second = server.requests
    assert first.status == 503 and second.status == 200
    assert second.started - first.answered >= 1.0


async def test_stream_retry_after_is_honoured(server):
    server.fail(429, retry_after=0.5)
    text = "".join([p async for p in chat(server).stream(REQUEST)])
    first, second = server.requests
    assert text and second.started - first.answered >= 0.5


async def test_gives_up_after_max_retries(server):
    server.fail(500, times=5)
    with pytest.raises(ModelError, match=r"Ollama at .*fake-chat.*after 3 attempts.*HTTP 500"):
        await chat(server, max_retries=2).complete(REQUEST)
    assert len(server.requests) == 3


async def test_timeouts_are_retried(server):
    server.fail(None, delay=1.2)
    assert (await chat(server, timeout=0.3).complete(REQUEST)).text
    assert len(server.requests) == 2


async def test_unknown_model_says_to_pull_it():
    with OllamaServer(models={"llama3.2"}) as s:
        with pytest.raises(ModelError, match=r"HTTP 404.*try pulling it.*model name"):
            await chat(s, model="llama3.3").complete(REQUEST)
        assert len(s.requests) == 1


async def test_api_key_is_sent_as_bearer_and_401_names_it():
    with OllamaServer(api_key="proxy-token") as s:
        assert (await chat(s, api_key="proxy-token").complete(REQUEST)).text
        with pytest.raises(ModelError) as info:
            await chat(s, api_key="wrong-token").complete(REQUEST)
        assert "HTTP 401" in str(info.value) and "OLLAMA_API_KEY" in str(info.value)
        assert "wrong-token" not in str(info.value)


async def test_without_a_key_no_authorization_header_is_sent(server, monkeypatch):
    """A local Ollama needs no key: nothing (not "Bearer None") is sent in its place."""
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    assert (await chat(server).complete(REQUEST)).text
    assert "authorization" not in server.requests[0].headers


async def test_connection_refused_is_a_model_error(server):
    url = server.url
    server.stop()
    with pytest.raises(ModelError, match=r"cannot connect to Ollama.*server is running"):
        await OllamaChat({"base_url": url, "max_retries": 1, **FAST}).complete(REQUEST)


async def test_concurrency_limit_is_respected():
    with OllamaServer(latency=0.2) as s:
        llm = chat(s, max_concurrency=3)
        await asyncio.gather(*(llm.complete(REQUEST) for _ in range(7)))
        assert s.max_in_flight == 3


async def test_base_url_with_a_path_prefix():
    """Behind a proxy at /ollama: the prefix is kept in front of /api/chat."""
    with OllamaServer("/ollama") as s:
        assert (await chat(s).complete(REQUEST)).text
        assert s.requests[0].path == "/ollama/api/chat"
        with pytest.raises(ModelError, match="HTTP 404"):
            await OllamaChat({"base_url": s.root, "model": "m", **FAST}).complete(REQUEST)


def test_host_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    assert OllamaChat({"model": "fake-chat"}).base_url == server.url


# -- embeddings ---------------------------------------------------------------------------


async def test_embeddings_are_float32_and_batched(server):
    emb = embedder(server, batch_size=2, keep_alive=60)
    texts = [f"passage {i} about 太阳能" for i in range(5)]
    out = await emb.embed(texts)
    assert out.dtype == np.float32 and out.shape == (5, 32) and out.flags["C_CONTIGUOUS"]
    assert np.allclose(out[3], fake_embedding(texts[3], 32), atol=1e-6)
    bodies = server.bodies("/api/embed")
    assert sorted(len(b["input"]) for b in bodies) == [1, 2, 2]
    assert all(b["truncate"] is True and b["keep_alive"] == 60 for b in bodies)
    assert emb.usage.by_role()["embedding"].input_tokens == count_tokens(*texts)


async def test_embedding_length_mismatch_names_the_fix(server):
    with pytest.raises(ModelError, match="set dimensions = 32"):
        await embedder(server, dimensions=768).embed(["x"])


def test_known_models_need_no_dimensions_others_do():
    assert OllamaEmbedder({"model": "nomic-embed-text:latest"}).dimension == 768
    with pytest.raises(ConfigError, match="the ollama embedder does not know .*set dimensions"):
        OllamaEmbedder({"model": "my-own-embedder"})


async def test_embedder_options_reach_the_request_and_its_identity(server):
    emb = embedder(server, model_options={"num_ctx": 512})
    await emb.embed(["x"])
    assert server.bodies("/api/embed")[0]["options"] == {"num_ctx": 512}
    assert embedder(server).model_id == "ollama:fake-embed:32"
    assert emb.model_id != embedder(server).model_id and emb.model_id.startswith("ollama:fake-embed:32")


# -- <think> stripping --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>hmm</think>\n\nAnswer", "Answer"),
        ("Answer", "Answer"),
        ("a<think>x</think> b<think>y</think>  c", "abc"),
        ("<think>cut off while thinking", ""),
        ("no <thin k> tag", "no <thin k> tag"),
        ("", ""),
    ],
    ids=["block-then-answer", "no-block", "two-blocks", "cut-off", "no-tag", "empty"],  # no escaped "\n"
)
def test_strip_think(text, expected):
    assert strip_think(text) == expected


def _feed_in_pieces(think: ThinkFilter, text: str, sizes: list[int]) -> str:
    out, i, k = [], 0, 0
    while i < len(text):
        size = sizes[k % len(sizes)]
        out.append(think.feed(text[i : i + size]))
        i, k = i + size, k + 1
    out.append(think.flush())
    return "".join(out)


PARTS = st.lists(
    st.sampled_from(["<think>", "</think>", "<th", "ink>", "</", " ", "\n", "answer", "é"]), max_size=12
)


@given(PARTS, PARTS, st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_think_filter_on_any_split_equals_strip_think(first, second, sizes):
    """Fed in pieces cut anywhere (a piece may hold several tags), ThinkFilter
    gives strip_think of the whole; after flush() it starts afresh on the next stream."""
    think = ThinkFilter()
    for text in ("".join(first), "".join(second)):
        assert _feed_in_pieces(think, text, sizes) == strip_think(text)


def test_think_filter_holds_back_only_what_could_start_a_tag():
    """A stream is not delayed: feed() returns at once all text that no tag can start."""
    think = ThinkFilter()
    assert think.feed("plain answer") == "plain answer"
    assert think.feed(" then <th") == " then "
    assert think.feed("ink>hidden</thi") == ""
    assert think.feed("nk>\n after") == "after"
    assert think.flush() == ""
    assert think.feed("<think>cut off mid-tag </th") == ""
    assert think.flush() == "", "a block cut off (even mid-tag) is removed to the end"


async def test_a_stream_cut_midway_is_an_error_without_retry(server):
    server.fail(None, cut_after=3)
    received = []
    with pytest.raises(ModelError, match="Ollama.*broke off a streamed answer"):
        async for piece in chat(server).stream(REQUEST):
            received.append(piece)
    assert received and len(server.requests) == 1


def test_registered_through_the_entry_point():
    """Troubleshoot: `pip install -e plugins/ragkit-ollama`, then `ragkit plugins`."""
    from ragkit.plugins import get_registry

    registry = get_registry()
    assert registry.get("llm", "ollama") is OllamaChat
    assert registry.get("embedder", "ollama") is OllamaEmbedder


async def test_a_malformed_body_is_retried_then_named(server):
    server.fail(None, malformed=b"not json at all")
    llm = OllamaChat({"base_url": server.url, "model": "m", "retry_initial_delay": 0.01, "retry_max_delay": 0.05})
    assert (await llm.complete(ChatRequest(prompt="hi", role="answer"))).text and len(server.requests) == 2
    server.reset()
    server.fail(None, malformed=b"not json at all", times=5)
    llm = OllamaChat({"base_url": server.url, "model": "m", "max_retries": 1, "retry_initial_delay": 0.01})
    with pytest.raises(ModelError, match=r"Ollama at .* not valid API JSON after 2 attempts"):
        await llm.complete(ChatRequest(prompt="hi", role="answer"))
