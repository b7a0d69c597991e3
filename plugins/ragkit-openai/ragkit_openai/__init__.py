"""ragkit adapters for OpenAI and OpenAI-compatible servers, through the
official ``openai`` client: the ``openai`` LLM and the ``openai`` embedder.

Names are imported on first use, so that ragkit's plugin scan stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OpenAIChat", "OpenAIChatOptions", "OpenAIEmbedder", "OpenAIEmbedderOptions"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("OpenAIChat", "OpenAIChatOptions"):
        from ragkit_openai import chat

        return getattr(chat, name)
    if name in ("OpenAIEmbedder", "OpenAIEmbedderOptions"):
        from ragkit_openai import embeddings

        return getattr(embeddings, name)
    raise AttributeError(f"module 'ragkit_openai' has no attribute {name!r}")
