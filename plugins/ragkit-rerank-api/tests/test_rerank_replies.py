"""What rerank servers answer besides the two dialects ``RerankServer`` speaks:
``data`` lists and plain ``score`` fields (text-embeddings-inference, vLLM),
items a client must not trust, token counts in each service's place, and the
error bodies each service sends. Each reply is canned, served on loopback
(``ragkit.testing.http_server``) to the real httpx client.

Troubleshoot: ``RerankAPI._read_scores``, ``_tokens`` and ``_server_message``.
"""

from __future__ import annotations

import pytest

from ragkit.errors import ModelError
from ragkit.testing.http_server import CannedServer
from ragkit_rerank_api import RerankAPI

DOCS = ["a", "b"]


@pytest.fixture
def server():
    with CannedServer("/v2", path="/rerank") as server:
        yield server


def reranker(server, **options) -> RerankAPI:
    base = {"flavor": "cohere", "base_url": server.url, "api_key": "k", "model": "m", "max_retries": 0}
    return RerankAPI({**base, **options})


@pytest.mark.parametrize(
    "body",
    [
        {"data": [{"index": 1, "score": 0.25}, {"index": 0, "score": 1}]},
        {"results": [{"index": 1, "relevance_score": 0.25, "score": 9}, {"index": 0, "relevance_score": 1}]},
    ],
    ids=["data-score", "relevance-score-first"],
)
async def test_scores_from_any_dialect_come_back_in_document_order(server, body):
    server.answer(body)
    assert await reranker(server).scores("q", DOCS) == [1.0, 0.25]


@pytest.mark.parametrize(
    "item",
    [{"index": 2, "score": 0.5}, {"index": -1, "score": 0.5}, {"index": "1", "score": 0.5},
     {"index": 1, "score": "0.5"}, {"index": 1, "score": float("nan")}, {"index": 1}],
    ids=["past-the-end", "negative", "str-index", "str-score", "nan", "no-score"],
)
async def test_an_item_that_cannot_be_trusted_leaves_its_document_unscored(server, item):
    server.answer({"results": [{"index": 0, "relevance_score": 0.1}, item]})
    with pytest.raises(ModelError, match=r"\bscored 1 of 2 documents.*\bset batch_size at or below the server's limit"
                                         r" on documents per request \(or on top_n\)(?!X)"):
        await reranker(server).scores("q", DOCS)


@pytest.mark.parametrize("body", [{"scores": [0.1, 0.2]}, [0.1, 0.2], {"results": "none"}], ids=["key", "list", "str"])
async def test_a_reply_without_a_results_list_names_the_path(server, body):
    server.answer(body)
    with pytest.raises(ModelError, match=r"\banswered without a 'results' list\b.*\bcheck that path '/rerank' is a "
                                         r"rerank endpoint"):
        await reranker(server).scores("q", DOCS)


@pytest.mark.parametrize(
    ("extra", "tokens"),
    [({"usage": {"total_tokens": 7, "prompt_tokens": 5}}, 7), ({"usage": {"prompt_tokens": 5}}, 5),
     ({"meta": {"tokens": {"input_tokens": 4}}}, 4), ({}, 0)],
    ids=["jina-total", "prompt", "cohere-meta", "none"],
)
async def test_tokens_are_read_where_each_service_reports_them(server, extra, tokens):
    server.answer({"results": [{"index": 0, "relevance_score": 1}, {"index": 1, "relevance_score": 0}], **extra})
    rr = reranker(server)
    await rr.scores("q", DOCS)
    assert rr.usage.by_role()["rerank"].input_tokens == tokens


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ({"message": "bad top_n", "detail": "other"}, "bad top_n"),
        ({"detail": "too many documents"}, "too many documents"),
        ({"error": {"message": "model not found"}}, "model not found"),
        ({"error": "plain words"}, "plain words"),
        ({"unknown": "x" * 400}, ("{'unknown': '" + "x" * 400)[:300]),
        ("<html>" + "y" * 400, ("<html>" + "y" * 400)[:300]),
        ("", "HTTP 400"),
    ],
    ids=["cohere", "jina", "error-object", "error-str", "other-json", "not-json", "empty"],
)
async def test_an_error_reply_shows_the_servers_words(server, body, shown):
    """A 400 (the smallest error status) is an error at once, with the
    server's own words, cut at 300 characters."""
    server.answer(body, status=400)
    with pytest.raises(ModelError) as caught:
        await reranker(server).scores("q", DOCS)
    message = str(caught.value)
    assert "HTTP 400" in message and shown in message
    assert shown + "x" not in message and shown + "y" not in message
    if isinstance(body, dict) and "unknown" not in body:  # the words alone, not the JSON around them
        assert "{" not in message


async def test_no_key_sends_no_authorization_header(server):
    server.answer({"results": [{"index": 0, "relevance_score": 1}, {"index": 1, "relevance_score": 0}]})
    await reranker(server, api_key=None).scores("q", DOCS)
    (request,) = server.requests
    assert "authorization" not in {h.lower() for h in request.headers}
