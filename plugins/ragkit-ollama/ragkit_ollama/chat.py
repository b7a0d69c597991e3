"""``OllamaChat``: the ``ollama`` LLM (``/api/chat``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from pydantic import Field

from ragkit.models import model_identity
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest, Completion
from ragkit_ollama._base import OllamaAdapter, OllamaOptions
from ragkit_ollama.think import ThinkFilter, strip_think


class OllamaChatOptions(OllamaOptions):
    """``[llm.options]`` of the ``ollama`` LLM."""

    model: str = "qwen2.5:7b-instruct"
    num_ctx: int | None = Field(default=None, ge=1)
    """Context window in tokens. Ollama's default (2048-4096 by version) is too
    small for extraction prompts: set 8192 or more."""
    temperature: float | None = Field(default=None, ge=0)
    """Used when a request sets none; ``None`` leaves the model's default."""
    think: bool | None = None
    """``false`` turns off thinking for reasoning models (qwen3, deepseek-r1...);
    ``true`` turns it on; unset leaves the model's default. Thinking text is never
    part of the answer."""
    strip_think: bool = True
    """Remove ``<think>...</think>`` blocks that a server still puts in the answer."""


class OllamaChat(OllamaAdapter):
    """Chat through ``ollama.AsyncClient.chat``: JSON mode (``format="json"``),
    streaming, token usage from ``prompt_eval_count`` / ``eval_count`` per role
    in ``self.usage``. Not ``DETERMINISTIC`` unless you fix a seed yourself."""

    name: ClassVar[str] = "ollama"
    section: ClassVar[str] = "llm"
    capabilities = frozenset({Capability.STREAMING, Capability.JSON_MODE})
    Options = OllamaChatOptions
    options: OllamaChatOptions

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        opts = self.options
        self.model_id = model_identity(
            "ollama",
            opts.model,
            num_ctx=opts.num_ctx,
            temperature=opts.temperature,
            think=opts.think,
            keep_think_tags=not opts.strip_think or None,  # the default adds nothing to the id
            model_options=opts.model_options,
        )

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The ``AsyncClient.chat`` arguments for ``request``."""
        temperature = request.temperature if request.temperature is not None else self.options.temperature
        options = self.model_options(
            num_ctx=self.options.num_ctx, temperature=temperature, num_predict=request.max_tokens
        )
        params: dict[str, Any] = {"model": self.options.model, "messages": request.messages()}
        optional = {
            "options": options or None,
            "format": "json" if request.json_mode else None,
            "think": self.options.think,
            "keep_alive": self.options.keep_alive,
        }
        return params | {k: v for k, v in optional.items() if v is not None}

    async def complete(self, request: ChatRequest) -> Completion:
        params = self.params(request)
        response = await self.calls.run(lambda: self.client().chat(**params, stream=False))
        text = response.message.content or ""
        usage = self.usage.record(request.role, response.prompt_eval_count, response.eval_count)
        return Completion(text=strip_think(text) if self.options.strip_think else text, usage=usage)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        params = self.params(request)
        think = ThinkFilter() if self.options.strip_think else None
        last: Any = None
        try:
            async for part in self.calls.stream(lambda: self.client().chat(**params, stream=True)):
                last = part
                piece = part.message.content or ""
                if think is not None:
                    piece = think.feed(piece)
                if piece:
                    yield piece
            if think is not None and (rest := think.flush()):
                yield rest
        finally:  # also when the caller stops early: the call happened
            if last is not None:
                self.usage.record(request.role, last.prompt_eval_count, last.eval_count)
