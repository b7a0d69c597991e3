"""One chat turn answered by ragkit, in the pieces both protocols send.

The answer text is followed by a references block (``### References`` and a
``- [n] file`` line per source the answer cites, numbered as it cites them), so
a chat window shows where the answer comes from; the same references go in a
structured field of each protocol's response (``references``: ``Reference``
records as JSON).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from ragkit.schema import QueryResult, Reference
from ragkit.server.chat.context import ChatContext
from ragkit.server.chat.turns import MODEL_FAMILY, Turns


@dataclass
class Answered:
    """A query's result and what the protocols report about it."""

    ctx: ChatContext
    turns: Turns
    result: QueryResult
    started: float = field(default_factory=time.perf_counter)
    text: list[str] = field(default_factory=list)
    """Everything sent so far (answer and references block)."""

    @property
    def model(self) -> str:
        """The model that answered: ``ragkit:<the mode the engine ran>``."""
        return f"{MODEL_FAMILY}:{self.result.metadata.get('mode', self.turns.mode)}"

    @property
    def references(self) -> list[dict[str, Any]]:
        return [ref.model_dump(mode="json") for ref in self.result.references]

    async def pieces(self) -> AsyncIterator[str]:
        """The answer's pieces (one when not streamed), then the references block."""
        stream = self.result.stream
        if stream is None:
            yield self._sent(self.result.answer or "")
        else:
            async with aclosing(stream) as pieces:
                async for piece in pieces:
                    if piece:
                        yield self._sent(piece)
        block = references_block(self.result.references)
        if block:
            yield self._sent(block)

    async def full_text(self) -> str:
        return "".join([piece async for piece in self.pieces()])

    def _sent(self, piece: str) -> str:
        self.text.append(piece)
        return piece

    def usage(self) -> tuple[int, int]:
        """(prompt tokens, completion tokens): the prompt as the engine counted
        it when it built one, else the question and history."""
        count = self.ctx.rag.tokenizer.count
        prompt = (self.result.metadata.get("tokens") or {}).get("prompt_total")
        if not prompt:
            prompt = count(self.turns.question) + sum(count(t["content"]) for t in self.turns.history)
        return int(prompt), count("".join(self.text))

    def durations(self) -> tuple[float, float]:
        """(seconds in all, seconds writing the answer)."""
        total = time.perf_counter() - self.started
        return total, min(total, float(self.result.metadata.get("timings", {}).get("answer", 0.0)))


async def ask(ctx: ChatContext, turns: Turns, stream: bool) -> Answered:
    """Run the query as the request's principal, so the answer, its
    references and its cache entry hold only what that principal may read
    (``aquery`` does retrieval before it returns, so its errors come before
    any streamed byte)."""
    started = time.perf_counter()
    result = await ctx.rag.aquery(turns.question, turns.param(stream), principal=ctx.principal)
    return Answered(ctx, turns, result, started)


def references_block(references: list[Reference]) -> str:
    if not references:
        return ""
    lines = [f"- [{ref.number}] {ref.file_path or ref.doc_id}" for ref in references]
    return "\n\n### References\n\n" + "\n".join(lines)
