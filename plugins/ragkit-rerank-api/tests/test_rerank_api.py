"""The rerank-api reranker through httpx against ``RerankServer`` on
127.0.0.1, in both dialects. Timings come from the server's own records.

Troubleshoot: ``server.requests`` lists what reached the server (path,
headers, JSON body, monotonic times); print it when an assertion fails.
"""

from __future__ import annotations

import asyncio

import pytest

from ragkit.errors import ConfigError, ModelError
from ragkit.testing.http_server import count_tokens, fake_relevance
from ragkit_rerank_api import RerankAPI
from ragkit_rerank_api.testing import TEST_KEY, RerankServer

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
QUERY = "how do solar panels make electricity"
DOCS = [
    "Recipes for chocolate cake.",
    "Solar panels make electricity from sunlight.",
    "Panels of experts.",
    "How castles were built.",
    "Electricity from wind.",
]


@pytest.fixture(params=["cohere", "jina"])
def server(request):
    with RerankServer(flavor=request.param, api_key=TEST_KEY) as s:
        yield s


def reranker(server: RerankServer, **options) -> RerankAPI:
    base = {"flavor": server.flavor, "base_url": server.url, "api_key": TEST_KEY, "model": "fake-rerank"}
    return RerankAPI({**base, **FAST, **options})


async def test_scores_are_in_document_order(server):
    """The server answers sorted by relevance; scores come back by index."""
    scores = await reranker(server).scores(QUERY, DOCS)
    assert scores == [fake_relevance(QUERY, d) for d in DOCS]
    body = server.bodies("/rerank")[0]
    assert body == {
        "model": "fake-rerank",
        "query": QUERY,
        "documents": DOCS,
        "top_n": len(DOCS),
        **({"return_documents": False} if server.flavor == "jina" else {}),
    }
    assert server.requests[0].headers["authorization"] == f"Bearer {TEST_KEY}"


async def test_batching_splits_documents_and_keeps_order(server):
    rr = reranker(server, batch_size=2)
    assert await rr.scores(QUERY, DOCS) == [fake_relevance(QUERY, d) for d in DOCS]
    sizes = sorted(len(b["documents"]) for b in server.bodies("/rerank"))
    assert sizes == [1, 2, 2] and all(b["top_n"] == len(b["documents"]) for b in server.bodies("/rerank"))


async def test_empty_documents_make_no_call(server):
    assert await reranker(server).scores(QUERY, []) == []
    assert server.requests == []


async def test_usage_is_recorded(server):
    rr = reranker(server)
    await rr.scores(QUERY, DOCS)
    assert rr.usage.by_role()["rerank"].input_tokens == count_tokens(QUERY, *DOCS)


async def test_a_server_returning_fewer_results_is_an_error():
    """A server capping top_n below the batch: the error says to lower batch_size."""
    with RerankServer(max_results=3) as s:
        with pytest.raises(ModelError, match=r"scored 3 of 5 documents.*batch_size"):
            await reranker(s).scores(QUERY, DOCS)
        assert await reranker(s, batch_size=3).scores(QUERY, DOCS) == [fake_relevance(QUERY, d) for d in DOCS]


async def test_retry_after_is_honoured(server):
    server.fail(429, retry_after=1)
    await reranker(server).scores(QUERY, DOCS)
    first, second = server.requests
    assert first.status == 429 and second.status == 200
    assert second.started - first.answered >= 1.0


async def test_gives_up_after_max_retries(server):
    server.fail(502, times=4)
    with pytest.raises(ModelError, match=r"rerank API at .*after 2 attempts.*HTTP 502.*injected"):
        await reranker(server, max_retries=1).scores(QUERY, DOCS)
    assert len(server.requests) == 2


async def test_timeouts_are_retried(server):
    server.fail(None, delay=1.2)
    assert len(await reranker(server, timeout=0.3).scores(QUERY, DOCS)) == len(DOCS)
    assert len(server.requests) == 2


async def test_401_names_the_key_variable_and_hides_the_key(server):
    with pytest.raises(ModelError) as info:
        await reranker(server, api_key="bad-secret").scores(QUERY, DOCS)
    message = str(info.value)
    env = "COHERE_API_KEY" if server.flavor == "cohere" else "JINA_API_KEY"
    assert "HTTP 401" in message and "Incorrect API key" in message and env in message
    assert "bad-secret" not in message and len(server.requests) == 1


async def test_concurrency_limit_is_respected():
    with RerankServer(latency=0.2) as s:
        rr = reranker(s, batch_size=1, max_concurrency=2)
        await asyncio.gather(rr.scores(QUERY, DOCS), rr.scores(QUERY, DOCS))
        assert s.max_in_flight == 2 and len(s.requests) == 10


async def test_base_url_and_path():
    """base_url is the API root (any prefix); path is appended to it."""
    with RerankServer("/custom/v2") as s:
        assert len(await reranker(s).scores(QUERY, DOCS)) == 5
        assert s.requests[0].path == "/custom/v2/rerank"
        with pytest.raises(ModelError, match=r"HTTP 404.*base_url"):
            await reranker(s, path="/v1/rerank").scores(QUERY, DOCS)


def test_defaults_per_flavor(monkeypatch):
    monkeypatch.setenv("JINA_API_KEY", "j")
    jina = RerankAPI({"flavor": "jina"})
    assert (
        jina.base_url == "https://api.jina.ai/v1"
        and jina.model_id == "jina:jina-reranker-v2-base-multilingual"
    )
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    monkeypatch.delenv("CO_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="COHERE_API_KEY"):
        RerankAPI({})
    assert RerankAPI({"base_url": "http://127.0.0.1:9/v1"}).model_id == "cohere:rerank-v3.5"


def test_registered_through_the_entry_point():
    """Troubleshoot: `pip install -e plugins/ragkit-rerank-api`, then `ragkit plugins`."""
    from ragkit.plugins import get_registry

    assert get_registry().get("reranker", "rerank-api") is RerankAPI
