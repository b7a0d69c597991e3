"""Merge per-chunk extractions into one entity per name and one relation per pair.

An entity's or relation's stored state is a pure function of the extraction
fragments of its source chunks. That is what makes delete, crash recovery and
repair exact: recompute from the fragments that remain, and the result equals
indexing those sources from scratch.

Descriptions from different sources are kept as separate lines, so that
"project A is delayed" and "project B started a supplier review" never blur
into one claim (the pure merge, shared with the query side, is in
``ragkit.core.extraction``). Only when the lines pass a token or count
threshold does an LLM summarise them (map-reduce when they do not fit one
call), with a prompt that forbids merging facts about different subjects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from ragkit.core.extraction import SEPARATOR, Fragment, entity_properties, relation_properties
from ragkit.core.llm_cache import CachedLLM
from ragkit.core.pacing import in_writer_thread
from ragkit.core.prompts import build_summary_request
from ragkit.protocols import Tokenizer
from ragkit.sections.index import MergeConfig


@dataclass(frozen=True)
class Draft:
    """An entity's or relation's properties before its summary: the pure part of
    a merge, computed apart from the LLM call so that a graph update can do the
    CPU work in slices and the summary calls concurrently."""

    props: dict
    subject: str
    lines: list[str] | None = None
    """The description lines to summarise; ``None``: ``props`` is final."""


class Merger:
    def __init__(self, llm: CachedLLM | None, tokenizer: Tokenizer, config: MergeConfig) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self.config = config

    async def entity(self, key: str, fragments: Sequence[Fragment], *, summarise: bool = True) -> dict:
        """Node properties for the entity ``key`` from all its fragments
        (``summarise=False``: the joined lines, even past the threshold)."""
        return await self.finish(self.entity_draft(key, fragments, summarise=summarise))

    async def relation(self, key: tuple[str, str], fragments: Sequence[Fragment], *, summarise: bool = True) -> dict:
        """Edge properties for the relation ``key`` from all its fragments."""
        return await self.finish(self.relation_draft(key, fragments, summarise=summarise))

    def entity_draft(self, key: str, fragments: Sequence[Fragment], *, summarise: bool = True) -> Draft:
        props = entity_properties(key, fragments)
        return self._draft(props, props["name"], summarise)

    def relation_draft(self, key: tuple[str, str], fragments: Sequence[Fragment], *, summarise: bool = True) -> Draft:
        props = relation_properties(key, fragments)
        return self._draft(props, f"{props['source']} - {props['target']}", summarise)

    async def finish(self, draft: Draft) -> dict:
        """The draft's properties, with the summary of its lines when it needs one."""
        if draft.lines is None:
            return draft.props
        return {**draft.props, "description": await self._summarise(draft.subject, draft.lines)}

    def _draft(self, props: dict, subject: str, summarise: bool) -> Draft:
        """The fragments' joined description lines stay, unless they pass a threshold."""
        joined = props["description"]
        lines = joined.split(SEPARATOR) if joined else []
        if self.llm is None or not summarise or not self._needs_summary(lines, joined):
            return Draft(props, subject)
        return Draft(props, subject, lines)

    def _needs_summary(self, lines: list[str], joined: str) -> bool:
        return (
            len(lines) >= self.config.summary_min_fragments
            or self.tokenizer.count(joined) >= self.config.summary_min_tokens
        )

    async def _summarise(self, subject: str, lines: list[str]) -> str:
        """Map-reduce: summarise groups that fit one call, then their summaries."""
        limit = self.config.summary_context_tokens
        while True:
            # Counting every line's tokens is the CPU part of a summary (a hub
            # entity has thousands of lines): in a worker thread, off the loop.
            groups = await in_writer_thread(self._groups, lines, limit)
            summaries = [await self._summary_call(subject, g) for g in groups]
            if len(summaries) == 1:
                return summaries[0]
            if len(summaries) >= len(lines):  # no progress: a single line is too long
                return SEPARATOR.join(summaries)
            lines = summaries

    def _groups(self, lines: list[str], limit: int) -> list[list[str]]:
        groups: list[list[str]] = [[]]
        used = 0
        for line in lines:
            n = self.tokenizer.count(line) + 1
            if groups[-1] and used + n > limit:
                groups.append([])
                used = 0
            groups[-1].append(line)
            used += n
        return groups

    async def _summary_call(self, subject: str, lines: list[str]) -> str:
        assert self.llm is not None
        request = build_summary_request(
            subject, lines, language=self.config.language,
            max_tokens=self.config.summary_max_output_tokens,
        )
        text = (await self.llm.complete(request)).strip()
        return text or SEPARATOR.join(lines)
