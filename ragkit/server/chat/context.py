"""What the chat routers need from the app: a per-request context and limits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from ragkit.access import Principal
from ragkit.rag import RAG


class ChatContext(Protocol):
    """What the app's request dependency returns for a chat request."""

    @property
    def rag(self) -> RAG:
        """The request's workspace, open."""
        ...

    @property
    def principal(self) -> Principal | None:
        """Who asks: every answer is made as them (``RAG.aquery(..., principal=...)``);
        ``None`` reads everything (the server's keyless loopback mode)."""
        ...


ContextDependency = Callable[..., Awaitable[ChatContext]]
"""A FastAPI dependency (it may take the request, headers, path parameters
such as ``workspace``) that authenticates the request and returns its
context, or raises (``HTTPException(401)``) to refuse it. An async generator
that yields the context (to release a leased workspace after the response)
works too: FastAPI resolves it once per request, and a streamed answer is
sent before its exit code runs."""


class ChatLimits(BaseModel):
    """Bounds on a chat request; over one is a 413 that names it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_messages: int = Field(default=200, ge=1)
    """Most messages in one conversation (history included)."""
    max_message_chars: int = Field(default=32_000, ge=1)
    """Longest single message or prompt, in characters."""
    max_total_chars: int = Field(default=200_000, ge=1)
    """Longest conversation, all messages together, in characters."""
