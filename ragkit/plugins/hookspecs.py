"""Hook specifications: each hook receives a ``register(cls)`` callback.

One per row of ``ragkit.plugins.kinds.KINDS`` (a test checks they agree)."""

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


@hookspec
def register_query_modes(register):
    """Register QueryMode classes (``ragkit.query.modes.QueryMode`` subclasses)."""


@hookspec
def register_loaders(register):
    """Register Loader classes (``ragkit.loaders.Loader`` subclasses): file types to text with pages."""
