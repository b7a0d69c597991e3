"""``RerankServer``: a loopback ``/rerank`` endpoint in Cohere's or Jina's
dialect, for tests with the real httpx client (see
``ragkit.testing.http_server``).

``POST {prefix}/rerank`` scores each document with ``fake_relevance`` (the
fraction of the query's words it contains), sorts by score, keeps ``top_n``
(and at most ``max_results``, to imitate a server with a lower limit) and
answers ``{"results": [{"index", "relevance_score"}]}`` plus Cohere's
``meta`` or Jina's ``usage`` and ``document`` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ragkit.testing.http_server import LoopbackServer, Recorded, Reply, Route, count_tokens, fake_relevance

TEST_KEY = "rerank-test-key"


class RerankServer(LoopbackServer):
    def __init__(
        self,
        prefix: str = "/v1",
        *,
        flavor: Literal["cohere", "jina"] = "cohere",
        max_results: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(prefix, **kwargs)
        self.flavor = flavor
        self.max_results = max_results

    def routes(self) -> Mapping[tuple[str, str], Route]:
        return {("POST", "/rerank"): self._rerank}

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(status, json={"detail": message} if self.flavor == "jina" else {"message": message})

    def _rerank(self, request: Recorded) -> Reply:
        body = request.body
        if (problem := self.unknown_model(body)) is not None:
            return problem
        texts = [d if isinstance(d, str) else d.get("text", "") for d in body["documents"]]
        ranked = sorted(
            ({"index": i, "relevance_score": fake_relevance(body["query"], t)} for i, t in enumerate(texts)),
            key=lambda r: -r["relevance_score"],
        )
        keep = min(n for n in (body.get("top_n"), self.max_results, len(ranked)) if n is not None)
        results = ranked[:keep]
        if self.flavor == "cohere":
            meta = {
                "billed_units": {"search_units": 1},
                "tokens": {"input_tokens": count_tokens(body["query"], *texts)},
            }
            return Reply(json={"id": "rerank-loopback", "results": results, "meta": meta})
        if body.get("return_documents", True):
            results = [{**r, "document": {"text": texts[r["index"]]}} for r in results]
        tokens = count_tokens(body["query"], *texts)
        usage = {"total_tokens": tokens, "prompt_tokens": tokens}
        return Reply(json={"model": body.get("model"), "usage": usage, "results": results})


def shared_server() -> RerankServer:
    """The process's server for the contract suite (key ``TEST_KEY``)."""
    return RerankServer.shared(api_key=TEST_KEY)


def reranker_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """``rerank-api`` options for ragkit's contract run: the loopback server."""
    return {"base_url": shared_server().url, "api_key": TEST_KEY, "model": "fake-rerank", "max_retries": 1}


CONTRACT_OPTIONS = {"reranker:rerank-api": reranker_options}
"""What ragkit's contract run tests the adapter with (the ``ragkit.testing`` entry point)."""
