"""``OpenAIChat``: the ``openai`` LLM, for OpenAI and every server that speaks
its ``/chat/completions`` API (vLLM, LM Studio, DeepSeek, Ollama's ``/v1``,
Azure OpenAI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar, Literal

from pydantic import Field

from ragkit.models import model_identity
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest, Completion
from ragkit_openai._base import OpenAIAdapter, OpenAIOptions


class OpenAIChatOptions(OpenAIOptions):
    """``[llm.options]`` of the ``openai`` LLM."""

    model: str = "gpt-4o-mini"
    temperature: float | None = Field(default=None, ge=0)
    """Used when a request sets none; ``None`` leaves the server's default."""
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """How a request's token limit is sent: OpenAI's reasoning models (o-series,
    gpt-5) accept only ``max_completion_tokens``; many servers only ``max_tokens``."""
    stream_usage: bool = True
    """Ask for a usage chunk at the end of streams (``stream_options.include_usage``);
    turn off for servers that reject ``stream_options``."""


class OpenAIChat(OpenAIAdapter):
    """Chat completions with JSON mode (``response_format: json_object``) and
    streaming; token usage from the API's ``usage`` is kept per role in
    ``self.usage``. Not ``DETERMINISTIC``: hosted models are not, even at
    temperature 0."""

    name: ClassVar[str] = "openai"
    section: ClassVar[str] = "llm"
    capabilities = frozenset({Capability.STREAMING, Capability.JSON_MODE})
    Options = OpenAIChatOptions
    options: OpenAIChatOptions

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = model_identity(
            "openai",
            self.options.model,
            temperature=self.options.temperature,
            extra_body=self.options.extra_body,
        )

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments for ``request``."""
        params: dict[str, Any] = {"model": self.options.model, "messages": request.messages()}
        temperature = request.temperature if request.temperature is not None else self.options.temperature
        if temperature is not None:
            params["temperature"] = temperature
        if request.max_tokens is not None:
            params[self.options.max_tokens_param] = request.max_tokens
        if request.json_mode:
            params["response_format"] = {"type": "json_object"}
        if self.extra_body():
            params["extra_body"] = self.extra_body()
        return params

    async def complete(self, request: ChatRequest) -> Completion:
        params = self.params(request)
        response = await self.calls.run(lambda: self.client().chat.completions.create(**params))
        if not response.choices:
            raise self.calls.service.bad_response("answered with no choices", "check the server's logs")
        usage = response.usage
        recorded = self.usage.record(
            request.role, getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0)
        )
        return Completion(text=response.choices[0].message.content or "", usage=recorded)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        params = {**self.params(request), "stream": True}
        if self.options.stream_usage:
            params["stream_options"] = {"include_usage": True}
        usage: Any = None
        answered = False
        try:
            async for chunk in self.calls.stream(lambda: self.client().chat.completions.create(**params)):
                answered, usage = True, chunk.usage or usage
                for choice in chunk.choices:
                    if choice.index == 0 and choice.delta and choice.delta.content:
                        yield choice.delta.content
        finally:  # also when the caller stops early: the call happened
            if answered:
                self.usage.record(
                    request.role, getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0)
                )
