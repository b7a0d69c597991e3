"""Counting tokens with the configured tokenizer, for budgets and usage."""

from __future__ import annotations

from ragkit.protocols import ChatRequest, Tokenizer


def request_tokens(tokenizer: Tokenizer, request: ChatRequest) -> int:
    """Tokens of a request's texts (system, history, prompt); a provider's few
    tokens of chat framing per message are not included."""
    texts = [request.system or "", *(m.content for m in request.history), request.prompt]
    return sum(tokenizer.count(t) for t in texts if t)
