"""A ragkit reranker for Cohere- and Jina-compatible ``/rerank`` endpoints,
over httpx: the ``rerank-api`` reranker."""

from ragkit_rerank_api.reranker import RerankAPI, RerankAPIOptions

__all__ = ["RerankAPI", "RerankAPIOptions"]
__version__ = "0.1.0"
