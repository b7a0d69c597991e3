"""Hook of the ``rerank-api`` entry point. Cheap to import: httpx is
imported only when the adapter is built."""

from ragkit.plugins import hookimpl


@hookimpl
def register_rerankers(register):
    from ragkit_rerank_api.reranker import RerankAPI

    register(RerankAPI)
