"""Hooks of the ``openai`` entry point. Cheap to import: the ``openai``
client is imported only when an adapter is built."""

from ragkit.plugins import hookimpl


@hookimpl
def register_llms(register):
    from ragkit_openai.chat import OpenAIChat

    register(OpenAIChat)


@hookimpl
def register_embedders(register):
    from ragkit_openai.embeddings import OpenAIEmbedder

    register(OpenAIEmbedder)
