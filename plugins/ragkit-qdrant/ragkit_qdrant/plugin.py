"""Hooks of the ``qdrant`` entry point. Cheap to import: ``qdrant_client`` is
imported only when a store is built."""

from ragkit.plugins import hookimpl


@hookimpl
def register_vector_stores(register):
    from ragkit_qdrant.store import QdrantVectorStore

    register(QdrantVectorStore)
