"""The model check of entity resolution: the LLM decides the pairs of names the
rules call ``MAYBE`` (an acronym, one side's qualifier, a longer form;
``core/aliases.py``), which only knowledge of the world tells apart.

It reads the two names only, like the rules, so a link stays a function of the
two entity keys (exact through deletes, nothing from a document a user may not
read). Pairs go ``PAIRS_PER_CALL`` to a call, in key order, through the LLM
cache: re-indexing asks nothing again, and the calls are counted under their
own role (``aliases``) in the index report. The answer is untrusted: anything
but the numbers of listed lines links nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence

from ragkit.core.llm_cache import CachedLLM
from ragkit.core.prompts import build_aliases_request

log = logging.getLogger(__name__)

PAIRS_PER_CALL = 16
"""Pairs judged in one call. On MuSiQue (1,890 passages, 19,138 entities, 2,095
LLM calls to index) the rules leave 918 ``MAYBE`` pairs: a call each would
cost 1.44 times the calls of resolution off; sixteen to a call, grouped per
update, 68 calls, 1.03 times (``docs/benchmarks.md``, entity resolution)."""
_OBJECT = re.compile(r"\{.*\}", re.S)


class ModelCheck:
    """``AliasIndex.check``: (key, key, why) pairs -> the pairs the model says are one entity."""

    def __init__(self, llm: CachedLLM, per_call: int = PAIRS_PER_CALL) -> None:
        self.llm = llm
        self.per_call = per_call

    async def __call__(self, pairs: list[tuple[str, str, str]]) -> set[tuple[str, str]]:
        ordered = sorted({(a, b) for a, b, _ in pairs})
        groups = [ordered[i : i + self.per_call] for i in range(0, len(ordered), self.per_call)]
        answers = await asyncio.gather(*(self._ask(g) for g in groups))
        return {pair for found in answers for pair in found}

    async def _ask(self, group: list[tuple[str, str]]) -> list[tuple[str, str]]:
        text = await self.llm.complete(build_aliases_request(group))
        numbers = same_lines(text, len(group))
        if numbers is None:
            log.warning("the alias check's answer was not the JSON object asked for: %d pairs left unlinked",
                        len(group))
            return []
        return [group[n - 1] for n in sorted(numbers)]


def same_lines(text: str, lines: int) -> set[int] | None:
    """The line numbers an answer says are the same (``None``: not an answer)."""
    found = _OBJECT.search(text or "")
    try:
        value = json.loads(found.group(0)) if found else None
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("same"), list):
        return None
    return {n for n in value["same"] if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= lines}
