"""Hooks of the ``chroma`` entry point. Cheap to import: ``chromadb`` is
imported only when a store is built."""

from ragkit.plugins import hookimpl


@hookimpl
def register_vector_stores(register):
    from ragkit_chroma.store import ChromaHttpVectorStore, ChromaVectorStore

    register(ChromaVectorStore)
    register(ChromaHttpVectorStore)
