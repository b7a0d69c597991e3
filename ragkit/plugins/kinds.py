"""Every kind of thing a plugin can register, in one table.

The registry's hooks, the store/model split of ``create_store``/``create_model``,
the order ``ragkit plugins`` lists kinds in and the backend sections of
``ragkit.toml`` all derive from ``KINDS``; adding a kind is one row here plus its
hook specification in ``hookspecs.py`` (a test checks the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["store", "model", "pipeline"]


@dataclass(frozen=True)
class Kind:
    name: str
    """As settings, ``Registry.get`` and ``ragkit plugins`` spell it."""
    hook: str
    """The hook plugins implement to register classes of this kind."""
    role: Role
    """``store``: built from a ``StoreConfig``; ``model``: built from options;
    ``pipeline``: a part of indexing or querying that the core builds itself."""
    section: bool = False
    """Configured by a ``[name]`` section of ``ragkit.toml`` naming its adapter."""
    check: str | None = None
    """``module:function(cls, name)`` returning why a registered class cannot
    serve, or ``None``; a refused class is listed with the reason, never used."""
    noun: str = ""
    """What one is called in messages (default ``<name> adapter``)."""

    @property
    def label(self) -> str:
        return self.noun or f"{self.name} adapter"


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("kv", "register_kv_stores", "store", section=True),
        Kind("vector", "register_vector_stores", "store", section=True),
        Kind("graph", "register_graph_stores", "store", section=True),
        Kind("doc_status", "register_doc_status_stores", "store", section=True),
        Kind("llm", "register_llms", "model", section=True),
        Kind("embedder", "register_embedders", "model", section=True),
        Kind("reranker", "register_rerankers", "model", section=True),
        Kind("tokenizer", "register_tokenizers", "model", section=True),
        Kind("chunker", "register_chunkers", "pipeline"),
        Kind("loader", "register_loaders", "pipeline",
             check="ragkit.loaders.registry:refusal", noun="loader"),
        Kind("query_mode", "register_query_modes", "pipeline",
             check="ragkit.query.modes:refusal", noun="query mode"),
    )
}
"""Kind name -> kind, in the order ``ragkit plugins`` lists them."""

STORE_KINDS = tuple(k for k, kind in KINDS.items() if kind.role == "store")
MODEL_KINDS = tuple(k for k, kind in KINDS.items() if kind.role == "model")
SECTION_KINDS = tuple(k for k, kind in KINDS.items() if kind.section)
"""The backend sections of the settings, ``[kv]`` to ``[tokenizer]``."""
