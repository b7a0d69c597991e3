"""Hooks of the ``sentence-transformers`` entry point. Cheap to import: torch
and sentence-transformers are imported only when a model is first used."""

from ragkit.plugins import hookimpl


@hookimpl
def register_embedders(register):
    from ragkit_sentence_transformers.embedder import SentenceTransformerEmbedder

    register(SentenceTransformerEmbedder)


@hookimpl
def register_rerankers(register):
    from ragkit_sentence_transformers.reranker import CrossEncoderReranker

    register(CrossEncoderReranker)
