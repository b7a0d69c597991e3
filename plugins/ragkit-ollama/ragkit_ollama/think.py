"""Removing ``<think>...</think>`` blocks that reasoning models (DeepSeek-R1,
Qwen3...) put in their answer text.

Ollama moves thinking to a separate field when asked (``think``), but older
servers and some models still send the tags inside the content. A block and
the whitespace right after it are removed; an unterminated block (the answer
was cut off while thinking) is removed to the end. ``ThinkFilter`` does the
same on a stream, whatever the piece boundaries, so a stream joined equals
``strip_think`` of the whole text.
"""

from __future__ import annotations

import re

OPEN, CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<think>.*?(?:</think>\s*|\Z)", re.DOTALL)


def strip_think(text: str) -> str:
    return _BLOCK.sub("", text)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could start ``tag``."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkFilter:
    """``feed(piece)`` returns the text that is certainly outside a block;
    ``flush()`` returns what was held back at the end of the stream."""

    def __init__(self) -> None:
        self._held = ""
        self._inside = False
        self._after_block = False

    def feed(self, piece: str) -> str:
        self._held += piece
        out: list[str] = []
        while self._held:
            if self._inside:
                if not self._leave_block():
                    break
            elif not self._emit_until_block(out):
                break
        return "".join(out)

    def flush(self) -> str:
        rest = "" if self._inside else self._held
        self._held, self._inside, self._after_block = "", False, False
        return rest

    def _leave_block(self) -> bool:
        end = self._held.find(CLOSE)
        if end < 0:
            keep = _partial_suffix(self._held, CLOSE)
            self._held = self._held[len(self._held) - keep :]
            return False
        self._held = self._held[end + len(CLOSE) :]
        self._inside, self._after_block = False, True
        return True

    def _emit_until_block(self, out: list[str]) -> bool:
        if self._after_block:
            self._held = self._held.lstrip()
            if not self._held:
                return False
            self._after_block = False
        start = self._held.find(OPEN)
        if start < 0:
            keep = _partial_suffix(self._held, OPEN)
            out.append(self._held[: len(self._held) - keep])
            self._held = self._held[len(self._held) - keep :]
            return False
        out.append(self._held[:start])
        self._held = self._held[start + len(OPEN) :]
        self._inside = True
        return True
