"""Registers the test doubles through the same hooks third parties use."""

from ragkit.plugins.hookspecs import hookimpl
from ragkit.testing.doubles import HashEmbedder, OverlapReranker, ScriptedLLM


@hookimpl
def register_llms(register):
    register(ScriptedLLM)


@hookimpl
def register_embedders(register):
    register(HashEmbedder)


@hookimpl
def register_rerankers(register):
    register(OverlapReranker)
