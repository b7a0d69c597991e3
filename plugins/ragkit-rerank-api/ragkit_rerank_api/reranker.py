"""``RerankAPI``: the ``rerank-api`` reranker.

Cohere (``POST /v2/rerank``) and Jina (``POST /v1/rerank``) speak the same
request, ``{"model", "query", "documents": [str], "top_n"}``, and answer
``{"results": [{"index", "relevance_score"}, ...]}`` sorted by relevance;
vLLM, Infinity, LocalAI and most rerank servers copy one or the other. The
adapter asks for every document (``top_n`` = the batch size) and puts each
score back at its document's position.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from ragkit.models import RemoteModel, RemoteOptions, model_identity

FLAVORS: dict[str, dict[str, Any]] = {
    "cohere": {
        "url": "https://api.cohere.com/v2",
        "model": "rerank-v3.5",
        "key_env": ("COHERE_API_KEY", "CO_API_KEY"),
        "name": "Cohere-compatible rerank API",
    },
    "jina": {
        "url": "https://api.jina.ai/v1",
        "model": "jina-reranker-v2-base-multilingual",
        "key_env": ("JINA_API_KEY",),
        "name": "Jina-compatible rerank API",
    },
}


class RerankAPIOptions(RemoteOptions):
    """``[reranker.options]`` of ``rerank-api`` (plus the connection, retry and
    concurrency ones of ``RemoteOptions``).

    - ``base_url``: the API root the ``path`` is added to. Default per flavor:
      ``https://api.cohere.com/v2`` or ``https://api.jina.ai/v1``; a vLLM
      server: ``http://localhost:8000/v1``.
    - ``api_key``: default ``COHERE_API_KEY`` / ``CO_API_KEY`` (cohere) or
      ``JINA_API_KEY`` (jina); servers without auth need none.
    """

    flavor: Literal["cohere", "jina"] = "cohere"
    """Which API the server copies: sets the defaults, and ``jina`` also sends
    ``return_documents: false`` (Jina returns the texts unless told not to)."""
    model: str | None = None
    """Default: ``rerank-v3.5`` (cohere), ``jina-reranker-v2-base-multilingual`` (jina)."""
    path: str = "/rerank"
    batch_size: int = Field(default=64, ge=1, le=1000)
    """Documents per request; requests run concurrently within ``max_concurrency``.
    Keep it at or below the server's own limit on documents (or on ``top_n``)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra JSON fields sent with every request (``max_tokens_per_doc``, ``truncation``...)."""


class RerankError(Exception):
    """An HTTP error answer, carrying the response for ``ragkit.models.classify``
    (which reads its status and ``Retry-After`` there)."""

    def __init__(self, response: Any) -> None:
        self.response = response
        super().__init__(_server_message(response))


class RerankAPI(RemoteModel):
    """Scores from a ``/rerank`` endpoint, one per document, in document order.
    Token usage, when the server reports it, is kept in ``self.usage``
    (role ``"rerank"``)."""

    name: ClassVar[str] = "rerank-api"
    section: ClassVar[str] = "reranker"
    capabilities = frozenset()
    Options = RerankAPIOptions
    options: RerankAPIOptions

    def configure(self) -> None:
        flavor = FLAVORS[self.options.flavor]
        self.service_name, self.default_url, self.key_env = flavor["name"], flavor["url"], flavor["key_env"]
        self.key_required_at_default_url = True
        self.model = self.options.model or flavor["model"]
        # extra_body (max_tokens_per_doc, truncation...) changes scores: part of the id.
        self.model_id = model_identity(self.options.flavor, self.model, extra_body=self.options.extra_body)

    def model_name(self) -> str:
        return self.model

    def client_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        import httpx

        return (httpx.TimeoutException,), (httpx.TransportError,)

    def new_client(self) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=self.options.timeout)

    async def close_client(self, client: Any) -> None:
        await client.aclose()

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        docs = list(documents)
        step = self.options.batch_size
        batches = await asyncio.gather(
            *(self._score_batch(query, docs[i : i + step]) for i in range(0, len(docs), step))
        )
        return [score for batch in batches for score in batch]

    async def _score_batch(self, query: str, documents: list[str]) -> list[float]:
        body: dict[str, Any] = {
            "model": self.model,
            "query": query,
            "documents": documents,
            "top_n": len(documents),
        }
        if self.options.flavor == "jina":
            body["return_documents"] = False
        payload = await self.calls.run(lambda: self._post({**body, **self.options.extra_body}))
        scores = self._read_scores(payload, len(documents))
        self.usage.record("rerank", _tokens(payload))
        return scores

    async def _post(self, body: dict[str, Any]) -> Any:
        response = await self.client().post(self.options.path, json=body)
        if response.status_code >= 400:
            raise RerankError(response)
        return response.json()

    def _read_scores(self, payload: Any, count: int) -> list[float]:
        service = self.calls.service
        results = payload.get("results", payload.get("data")) if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise service.bad_response(
                "answered without a 'results' list", f"check that path {self.options.path!r} is a rerank endpoint"
            )
        scores: list[float | None] = [None] * count
        for item in results:
            index, score = item.get("index"), item.get("relevance_score", item.get("score"))
            if (
                isinstance(index, int)
                and 0 <= index < count
                and isinstance(score, (int, float))
                and math.isfinite(score)
            ):
                scores[index] = float(score)
        if None in scores:
            got = sum(s is not None for s in scores)
            raise service.bad_response(
                f"scored {got} of {count} documents",
                "set batch_size at or below the server's limit on documents per request (or on top_n)",
            )
        return scores  # type: ignore[return-value]


def _tokens(payload: dict[str, Any]) -> int:
    """Input tokens as Jina (``usage.total_tokens``) or Cohere (``meta.tokens``) report them."""
    usage = payload.get("usage") or {}
    meta = (payload.get("meta") or {}).get("tokens") or {}
    return int(usage.get("total_tokens") or usage.get("prompt_tokens") or meta.get("input_tokens") or 0)


def _server_message(response: Any) -> str:
    """The server's error text: Cohere's ``message``, Jina's ``detail``, or ``error``."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or f"HTTP {response.status_code}"
    if isinstance(body, dict):
        error = body.get("error")
        found = (
            body.get("message")
            or body.get("detail")
            or (error.get("message") if isinstance(error, dict) else error)
        )
        if found:
            return str(found)
    return str(body)[:300]
