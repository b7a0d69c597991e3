"""What rerank servers answer besides the two dialects ``RerankServer`` speaks:
``data`` lists and plain ``score`` fields (text-embeddings-inference, vLLM),
items a client must not trust, token counts in each service's place, and the
error bodies each service sends. Each reply is canned, served on loopback
(``ragkit.testing.http_server``) to the real httpx client.

Troubleshoot: ``RerankAPI._read_scores``, ``_tokens`` and ``_server_message``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ragkit.errors import ModelError
from ragkit.testing.http_server import LoopbackServer, Recorded, Reply, Route
from ragkit_rerank_api import RerankAPI

DOCS = ["a", "b"]


class CannedServer(LoopbackServer):
    """``POST /v2/rerank`` answers ``reply``, whatever was asked."""

    reply = Reply()

    def routes(self) -> Mapping[tuple[str, str], Route]:
        return {("POST", "/rerank"): self._canned}

    def _canned(self, request: Recorded) -> Reply:
        return self.reply


@pytest.fixture
def httpserver():
    with CannedServer("/v2") as server:
        yield server


def reranker(httpserver, **options) -> RerankAPI:
    base = {"flavor": "cohere", "base_url": httpserver.url, "api_key": "k", "model": "m", "max_retries": 0}
    return RerankAPI({**base, **options})


def answer(httpserver, body, status: int = 200) -> None:
    if isinstance(body, str):  # the bytes as given, not JSON
        httpserver.reply = Reply(status, chunks=[body.encode()], content_type="text/html")
    else:
        httpserver.reply = Reply(status, json=body)


@pytest.mark.parametrize(
    "body",
    [
        {"data": [{"index": 1, "score": 0.25}, {"index": 0, "score": 1}]},
        {"results": [{"index": 1, "relevance_score": 0.25, "score": 9}, {"index": 0, "relevance_score": 1}]},
    ],
    ids=["data-score", "relevance-score-first"],
)
async def test_scores_from_any_dialect_come_back_in_document_order(httpserver, body):
    answer(httpserver, body)
    assert await reranker(httpserver).scores("q", DOCS) == [1.0, 0.25]


@pytest.mark.parametrize(
    "item",
    [{"index": 2, "score": 0.5}, {"index": -1, "score": 0.5}, {"index": "1", "score": 0.5},
     {"index": 1, "score": "0.5"}, {"index": 1, "score": float("nan")}, {"index": 1}],
    ids=["past-the-end", "negative", "str-index", "str-score", "nan", "no-score"],
)
async def test_an_item_that_cannot_be_trusted_leaves_its_document_unscored(httpserver, item):
    answer(httpserver, {"results": [{"index": 0, "relevance_score": 0.1}, item]})
    with pytest.raises(ModelError, match=r"scored 1 of 2 documents.*set batch_size at or below the server's limit"):
        await reranker(httpserver).scores("q", DOCS)


@pytest.mark.parametrize("body", [{"scores": [0.1, 0.2]}, [0.1, 0.2], {"results": "none"}], ids=["key", "list", "str"])
async def test_a_reply_without_a_results_list_names_the_path(httpserver, body):
    answer(httpserver, body)
    with pytest.raises(ModelError, match=r"answered without a 'results' list.*check that path '/rerank' is a "
                                         r"rerank endpoint"):
        await reranker(httpserver).scores("q", DOCS)


@pytest.mark.parametrize(
    ("extra", "tokens"),
    [({"usage": {"total_tokens": 7, "prompt_tokens": 5}}, 7), ({"usage": {"prompt_tokens": 5}}, 5),
     ({"meta": {"tokens": {"input_tokens": 4}}}, 4), ({}, 0)],
    ids=["jina-total", "prompt", "cohere-meta", "none"],
)
async def test_tokens_are_read_where_each_service_reports_them(httpserver, extra, tokens):
    answer(httpserver, {"results": [{"index": 0, "relevance_score": 1}, {"index": 1, "relevance_score": 0}], **extra})
    rr = reranker(httpserver)
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
async def test_an_error_reply_shows_the_servers_words(httpserver, body, shown):
    """A 400 (the smallest error status) is an error at once, with the
    server's own words, cut at 300 characters."""
    answer(httpserver, body, status=400)
    with pytest.raises(ModelError) as caught:
        await reranker(httpserver).scores("q", DOCS)
    message = str(caught.value)
    assert "HTTP 400" in message and shown in message
    assert shown + "x" not in message and shown + "y" not in message


async def test_no_key_sends_no_authorization_header(httpserver):
    answer(httpserver, {"results": [{"index": 0, "relevance_score": 1}, {"index": 1, "relevance_score": 0}]})
    await reranker(httpserver, api_key=None).scores("q", DOCS)
    (request,) = httpserver.requests
    assert "authorization" not in {h.lower() for h in request.headers}
