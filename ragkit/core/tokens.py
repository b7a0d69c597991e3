"""Counting tokens with the configured tokenizer, for budgets and usage."""

from __future__ import annotations

from typing import Protocol

from ragkit.protocols import ChatRequest, Tokenizer


class Counts(Protocol):
    """What counts tokens: a tokenizer, or a cache of its counts."""

    def count(self, text: str) -> int: ...


def request_tokens(tokenizer: Counts, request: ChatRequest) -> int:
    """Tokens of a request's texts (system, history, prompt); a provider's few
    tokens of chat framing per message are not included."""
    texts = [request.system or "", *(m.content for m in request.history), request.prompt]
    return sum(tokenizer.count(t) for t in texts if t)


def splits_between(tokenizer: Tokenizer, before: str, after: str) -> bool:
    """Whether a token boundary always falls between the characters ``before``
    and ``after``: ``count(a + b) == count(a) + count(b)`` for every text ``a``
    ending with ``before`` and every text ``b`` starting with ``after``.

    A tokenizer states it with an optional method of the same name
    (``TiktokenTokenizer.splits_between`` gives the proof for its encodings);
    one without it guarantees nothing, and texts are then counted whole.
    """
    check = getattr(tokenizer, "splits_between", None)
    return check is not None and bool(check(before, after))
