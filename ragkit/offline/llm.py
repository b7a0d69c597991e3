"""``OfflineLLM``: the ``offline`` LLM adapter, rules in place of a model.

It answers each kind of prompt the pipeline sends (told apart by
``ChatRequest.role``, or by the prompt's shape when the role is ``other``):

- extraction: entity and relation rows (``ragkit.offline.extract``); gleaning: nothing more;
- keywords: JSON with high- and low-level keywords (``ragkit.offline.keywords``);
- summary: the statements, cut to ``max_tokens``;
- answer: quoted sentences with references (``ragkit.offline.answer``), or a
  refusal without context (bypass mode);
- anything else: a short notice that no generative model is configured.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import os
import re
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pydantic import BaseModel, ConfigDict, Field

from ragkit.core.pools import PerProcess
from ragkit.core.prompts import (
    COMPLETE_MARKER,
    DEFAULT_ENTITY_TYPES,
    KEYWORDS_SYSTEM,
    SUMMARY_SYSTEM,
    chunk_text_of,
    is_gleaning_request,
)
from ragkit.core.tokens import request_tokens
from ragkit.offline import answer as answers
from ragkit.offline import keywords
from ragkit.offline.extract import extraction_rows
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest, Completion, ModelAdapter, Usage
from ragkit.tokenizer import TiktokenTokenizer

RULES_VERSION = "offline-rules-v1"
"""Part of ``model_id`` and so of every cache key: bump it whenever a rule
changes what the model answers, so that cached answers are not reused."""
OTHER = (
    "ragkit offline mode: no generative model is configured, so this prompt gets no written answer; "
    f"{answers.CONFIGURE}."
)
_TYPES_LINE = re.compile(r"^Entity types: (.+?)\. Output language: .*$", re.MULTILINE)
_PIECE = re.compile(r"\S+\s*|\s+")
_INTERACTIVE = PerProcess(lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragkit-offline"))
# Spawned, not forked: the parent runs threads (the loop's, tiktoken's).
_BULK = PerProcess(lambda: ProcessPoolExecutor(
    max_workers=1, mp_context=multiprocessing.get_context("spawn"),
    initializer=_exit_with_parent, initargs=(os.getpid(),)))
_BULK_ROLES = frozenset({"extraction", "summary"})
"""Where the rules run, off the event loop: an extraction is up to a second of
CPU work, which on the loop would hold every request of a server while a
document is indexed (``ragkit.core.pacing``). An indexing run's extractions and
summaries go to one worker process: in a thread, pure Python would hold the
GIL, and the loop would wait for it at every switch (measured: ``/health``
waited seconds). A query's keywords and answer are short: one worker thread,
so they never queue behind an indexing run either."""


def _exit_with_parent(parent: int) -> None:
    """In the worker: exit once the parent is gone. A parent killed outright
    (SIGKILL, no atexit) would otherwise leave the worker running, holding the
    parent's stdout and stderr open for whoever waits on them."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="ragkit-offline-parent", daemon=True).start()


def _complete_in_worker(request: ChatRequest) -> Completion:
    """In the worker process: the rules' answer to an extraction or a summary."""
    return _worker_rules().completion(request)


@functools.cache
def _worker_rules() -> OfflineLLM:
    # The defaults serve every caller: no option shapes an extraction or a
    # summary (``answer_sentences`` is the answers'). An option that did would
    # have to travel with the request.
    return OfflineLLM()


class OfflineOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer_sentences: int = Field(default=5, ge=1, le=50)
    """Most sentences an answer quotes."""


class OfflineLLM(ModelAdapter):
    """Rule-based stand-in for a chat model: no model file, no network, same
    answer every time. The default when no LLM is configured."""

    name = "offline"
    Options = OfflineOptions
    capabilities = frozenset({Capability.STREAMING, Capability.DETERMINISTIC, Capability.JSON_MODE})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        default = OfflineOptions().answer_sentences
        n = self.options.answer_sentences
        self.model_id = RULES_VERSION if n == default else f"{RULES_VERSION}-s{n}"
        self.tokenizer = TiktokenTokenizer()

    async def complete(self, request: ChatRequest) -> Completion:
        loop = asyncio.get_running_loop()
        # A subclass that answers otherwise (a test's) is kept in this process.
        if request.role in _BULK_ROLES and type(self).respond is OfflineLLM.respond:
            try:
                return await loop.run_in_executor(_BULK.get(), _complete_in_worker, request)
            except BrokenProcessPool:
                _BULK.drop()  # the worker died (killed, out of memory): the next call starts another
                raise
        return await loop.run_in_executor(_INTERACTIVE.get(), self.completion, request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        for piece in _PIECE.findall((await self.complete(request)).text):
            yield piece

    def completion(self, request: ChatRequest) -> Completion:
        """The answer and its usage (sync: pure computation)."""
        text = self.respond(request)
        usage = Usage(input_tokens=request_tokens(self.tokenizer, request), output_tokens=self.tokenizer.count(text))
        return Completion(text=text, usage=usage)

    def respond(self, request: ChatRequest) -> str:
        """The answer text (sync: pure computation)."""
        role = request.role if request.role != "other" else _role_of(request)
        if role == "extraction":
            return _extraction(request)
        if role == "keywords":
            return keywords.keywords_json(keywords.question_of(request.prompt))
        if role == "summary":
            statements = keywords.statements_of(request.prompt)
            return keywords.summarise(statements, request.max_tokens, self.tokenizer.count, self._cut)
        if role == "answer":
            if not answers.has_context(request.system):
                return answers.bypass(request.prompt)
            return answers.answer(request.prompt, request.system, self.options.answer_sentences)
        return OTHER

    def _cut(self, text: str, tokens: int) -> str:
        return self.tokenizer.decode(self.tokenizer.encode(text)[:tokens]).strip()


def _role_of(request: ChatRequest) -> str:
    if is_gleaning_request(request) or chunk_text_of(request.prompt) is not None:
        return "extraction"
    if request.system == KEYWORDS_SYSTEM:
        return "keywords"
    if request.system == SUMMARY_SYSTEM:
        return "summary"
    if answers.has_context(request.system):
        return "answer"
    return "other"


def _extraction(request: ChatRequest) -> str:
    text = chunk_text_of(request.prompt)  # None for a gleaning prompt: it holds no chunk
    if not text:
        return COMPLETE_MARKER  # gleaning: the rules found all they can the first time
    found = _TYPES_LINE.search(request.prompt)
    types = [t.strip() for t in found.group(1).split(",")] if found else list(DEFAULT_ENTITY_TYPES)
    return extraction_rows(text, types)
