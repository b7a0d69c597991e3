"""The offline LLM: ragkit's default when no LLM is configured.

It needs no model and no network. Rules stand in for the model at every call
the pipeline makes, so that indexing builds a real graph and queries return
cited passages out of the box:

- extraction (``extract_en``: capitalisation rules; ``extract_zh``: jieba's
  part-of-speech tags; ``extract``: mentions, relations within a sentence);
- query keywords and description summaries (``keywords``);
- answers (``answer``): the best-supported context sentences, quoted with their
  reference numbers, under a first line saying that no generative model was used.

Registered as the ``offline`` LLM; ``default_llm`` is what ``RAG`` uses when
``[llm]`` is not set, and it says so once per process on stderr, at its first
call (``ragkit index`` and ``ragkit query`` say it before they start).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import AsyncIterator
from typing import TextIO

from ragkit.offline.llm import RULES_VERSION, OfflineLLM, OfflineOptions
from ragkit.protocols import ChatRequest, Completion

__all__ = ["NOTICE", "RULES_VERSION", "DefaultOfflineLLM", "OfflineLLM", "OfflineOptions", "default_llm", "notice_once"]

NOTICE = (
    "ragkit: no LLM configured, so the built-in offline LLM is used (rules, no model): it extracts names and "
    "relations by rules and answers by quoting source sentences. To use a real model, add to ragkit.toml "
    '[llm] name = "openai" and [llm.options] model = "..." (API key in OPENAI_API_KEY or api_key), or '
    '[llm] name = "ollama" and [llm.options] model = "..." (server in OLLAMA_HOST or base_url); '
    "or set RAGKIT_LLM and RAGKIT_LLM__MODEL. `ragkit plugins` lists the installed LLMs."
)

_lock = threading.Lock()
_noticed = False


def notice_once(stream: TextIO | None = None) -> bool:
    """Print ``NOTICE`` on stderr the first time in this process; True if it printed now."""
    global _noticed
    with _lock:
        if _noticed:
            return False
        _noticed = True
    print(NOTICE, file=stream or sys.stderr, flush=True)
    return True


class DefaultOfflineLLM(OfflineLLM):
    """The offline LLM standing in for an unconfigured one: says so once per
    process at its first call, so a command that asks no model (``ragkit
    delete``, ``status``) prints no notice about one."""

    async def complete(self, request: ChatRequest) -> Completion:
        notice_once()
        return await super().complete(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        notice_once()
        async for piece in super().stream(request):
            yield piece


def default_llm() -> OfflineLLM:
    """The LLM ``RAG`` uses when none is configured (``DefaultOfflineLLM``)."""
    return DefaultOfflineLLM()
