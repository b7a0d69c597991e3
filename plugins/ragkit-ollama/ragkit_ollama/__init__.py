"""ragkit adapters for Ollama through the official ``ollama`` client: the
``ollama`` LLM and the ``ollama`` embedder.

Names are imported on first use, so that ragkit's plugin scan stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "OllamaChat",
    "OllamaChatOptions",
    "OllamaEmbedder",
    "OllamaEmbedderOptions",
    "ThinkFilter",
    "strip_think",
]
__version__ = "0.1.0"

_HOMES = {
    "OllamaChat": "chat",
    "OllamaChatOptions": "chat",
    "OllamaEmbedder": "embeddings",
    "OllamaEmbedderOptions": "embeddings",
    "ThinkFilter": "think",
    "strip_think": "think",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'ragkit_ollama' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"ragkit_ollama.{_HOMES[name]}"), name)
