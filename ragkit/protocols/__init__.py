"""The contracts every adapter implements. Docstrings are normative: the
contract suite in ``ragkit.testing`` checks exactly what they say. Store
adapters implement the protocols' hooks (``_upsert`` for ``upsert``...); the
public methods are the protocols' own (see ``ragkit.protocols.base``)."""

from ragkit.protocols.base import BaseStore, Capability, NoOptions, StoreConfig, bypass_template
from ragkit.protocols.doc_status import DocStatusStore
from ragkit.protocols.graph import EdgeKey, GraphStore, edge_key
from ragkit.protocols.kv import KVStore
from ragkit.protocols.lease import Fence, Holder, Lease
from ragkit.protocols.transaction import TransactionScope
from ragkit.protocols.models import (
    LLM,
    ChatRequest,
    Completion,
    Embedder,
    Message,
    ModelAdapter,
    Reranker,
    Tokenizer,
    Usage,
)
from ragkit.protocols.vector import VectorStore, matches_filter

__all__ = [
    "BaseStore",
    "Capability",
    "ChatRequest",
    "Completion",
    "DocStatusStore",
    "EdgeKey",
    "Embedder",
    "Fence",
    "GraphStore",
    "Holder",
    "KVStore",
    "LLM",
    "Lease",
    "Message",
    "ModelAdapter",
    "NoOptions",
    "Reranker",
    "StoreConfig",
    "Tokenizer",
    "TransactionScope",
    "Usage",
    "VectorStore",
    "bypass_template",
    "edge_key",
    "matches_filter",
]
