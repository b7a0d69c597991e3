"""Hook specifications: each hook receives a ``register(cls)`` callback."""

import pluggy

hookspec = pluggy.HookspecMarker("ragkit")
hookimpl = pluggy.HookimplMarker("ragkit")


@hookspec
def register_kv_stores(register):
    """Register KVStore classes."""


@hookspec
def register_vector_stores(register):
    """Register VectorStore classes."""


@hookspec
def register_graph_stores(register):
    """Register GraphStore classes."""


@hookspec
def register_doc_status_stores(register):
    """Register DocStatusStore classes."""


@hookspec
def register_llms(register):
    """Register LLM classes."""


@hookspec
def register_embedders(register):
    """Register Embedder classes."""


@hookspec
def register_rerankers(register):
    """Register Reranker classes."""


@hookspec
def register_tokenizers(register):
    """Register Tokenizer classes."""


@hookspec
def register_chunkers(register):
    """Register Chunker classes: ``cls(tokenizer, size, overlap)`` with ``chunk(doc)``."""
