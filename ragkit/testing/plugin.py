"""Registers the test doubles through the same hooks third parties use."""

from ragkit.plugins.hookspecs import hookimpl
from ragkit.testing.doubles import HashEmbedder, OverlapReranker, ScriptedLLM
from ragkit.testing.replay import ReplayLLM


@hookimpl
def register_llms(register):
    register(ScriptedLLM)
    register(ReplayLLM)


@hookimpl
def register_embedders(register):
    register(HashEmbedder)


@hookimpl
def register_rerankers(register):
    register(OverlapReranker)
