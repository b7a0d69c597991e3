"""Hooks of the ``ollama`` entry point. Cheap to import: the ``ollama``
client is imported only when an adapter is built."""

from ragkit.plugins import hookimpl


@hookimpl
def register_llms(register):
    from ragkit_ollama.chat import OllamaChat

    register(OllamaChat)


@hookimpl
def register_embedders(register):
    from ragkit_ollama.embeddings import OllamaEmbedder

    register(OllamaEmbedder)
