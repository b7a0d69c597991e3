"""Deliberately broken LLMs, the llm contract's test subjects: each adds
exactly one defect, named by its ``defect``, to the reference adapter (how
the self-test runs ``DEFECTS`` and ``RULE_BREAKERS``: ``base.broken``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ragkit.models.http import model_identity
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest, Completion, ModelAdapter, Usage
from ragkit.testing.doubles import words


# -- the reference: correct, with an output-changing option ------------------


class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repeat: int = Field(default=1, ge=1, le=4)
    """How many times the answer repeats the prompt: changes outputs."""
    chunk_size: int = Field(default=3, ge=1)
    """Characters per streamed piece: does not change outputs."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Forwarded to a provider unread (as remote adapters do): may change outputs."""


class EchoLLM(ModelAdapter):
    """Reference for the broken LLMs (passes the whole LLM contract): answers
    with the prompt, ``repeat`` times, streamed in small pieces."""

    Options = EchoOptions
    capabilities = frozenset({Capability.STREAMING, Capability.DETERMINISTIC})
    violates: ClassVar[str] = ""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = model_identity("echo", f"x{self.options.repeat}", extra_body=self.options.extra_body)

    def answer(self, request: ChatRequest) -> str:
        return request.prompt * self.options.repeat

    async def complete(self, request: ChatRequest) -> Completion:
        await asyncio.sleep(0)
        text = self.answer(request)
        return Completion(text=text, usage=Usage(input_tokens=len(words(request.prompt)), output_tokens=len(words(text))))

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        text = (await self.complete(request)).text
        for i in range(0, len(text), self.options.chunk_size):
            yield text[i : i + self.options.chunk_size]


# -- rule breakers ------------------------------------------------------------


class RepeatBlindIdLLM(EchoLLM):
    """``model_id`` leaves out ``repeat``, which changes every answer."""

    violates: ClassVar[str] = "llm.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores an option that changes outputs"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = "echo"


class PassThroughBlindIdLLM(EchoLLM):
    """``model_id`` leaves out ``extra_body``, which it forwards unread."""

    violates: ClassVar[str] = "llm.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores a pass-through option"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = f"echo:x{self.options.repeat}"


class LastRequestLLM(EchoLLM):
    """Keeps the request on the adapter and answers the latest one: requests
    in flight together get each other's answers."""

    violates: ClassVar[str] = "llm.concurrent.distinct"
    defect: ClassVar[str] = "concurrent requests get the last request's answer"

    async def complete(self, request: ChatRequest) -> Completion:
        self._current = request
        await asyncio.sleep(0.01)
        return Completion(text=self.answer(self._current))


class StrippingStreamLLM(EchoLLM):
    """Strips every streamed piece (whitespace between pieces is lost)."""

    violates: ClassVar[str] = "llm.stream.concatenates"
    defect: ClassVar[str] = "stream() strips each piece"

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        async for piece in super().stream(request):
            if piece.strip():
                yield piece.strip()


DEFECTS: tuple[type, ...] = ()

RULE_BREAKERS: dict[str, tuple[type, ...]] = {
    "LLMContract": (RepeatBlindIdLLM, PassThroughBlindIdLLM, LastRequestLLM, StrippingStreamLLM),
}

REFERENCES: dict[str, type] = {"LLMContract": EchoLLM}
