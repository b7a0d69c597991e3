"""Keywords stage: a question in, high-level (themes) and low-level (named things) out.

One LLM call asks for JSON; its answer is untrusted like any model output:
``parse_keywords`` takes the JSON object wherever it sits (prose, code fences),
accepts common key spellings and a string where a list was asked, trims,
de-duplicates and caps what it keeps, and never raises. Keywords the user
supplies skip the call; when none come back, the question itself is used.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from ragkit.core.llm_cache import CachedLLM
from ragkit.core.prompts import build_keywords_request

MAX_KEYWORDS = 20
MAX_KEYWORD_CHARS = 200
_HIGH = ("high_level_keywords", "high_level", "high", "themes", "high-level keywords")
_LOW = ("low_level_keywords", "low_level", "low", "entities", "low-level keywords")
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)



class Keywords(BaseModel):
    high_level: list[str] = Field(default_factory=list)
    low_level: list[str] = Field(default_factory=list)
    source: Literal["user", "llm", "question"] = "llm"
    """Where they came from; ``question``: nothing usable, the question itself is used."""
    warnings: list[str] = Field(default_factory=list)


def parse_keywords(text: str) -> tuple[list[str], list[str], list[str]]:
    """(high, low, warnings) from a model's answer; never raises on a ``str``."""
    data = _json_object(_FENCE.sub("", text))
    if data is None:
        return [], [], ["no JSON object with keywords in the answer"]
    lowered = {str(k).strip().lower(): v for k, v in data.items()}
    high = _clean(next((lowered[k] for k in _HIGH if k in lowered), []))
    low = _clean(next((lowered[k] for k in _LOW if k in lowered), []))
    warnings = [] if high or low else ["the answer's JSON holds no keywords"]
    return high, low, warnings


async def extract_keywords(
    question: str,
    *,
    high: list[str] | None = None,
    low: list[str] | None = None,
    llm: CachedLLM | None = None,
    language: str = "English",
    cache_scope: str | None = None,
) -> Keywords:
    """``cache_scope``: the extracted keywords are cached apart for it (a
    principal's: a hit must not tell it that someone else asked the same)."""
    if high or low:
        return Keywords(high_level=_clean(high or []), low_level=_clean(low or []), source="user")
    warnings: list[str] = []
    if llm is not None:
        answer = await llm.complete(build_keywords_request(question, language), scope=cache_scope)
        found_high, found_low, warnings = parse_keywords(answer)
        if found_high or found_low:
            return Keywords(high_level=found_high, low_level=found_low, source="llm", warnings=warnings)
    else:
        warnings = ["no LLM configured for keywords"]
    fallback = _clean([question])
    return Keywords(high_level=fallback, low_level=fallback, source="question", warnings=warnings)


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that parses, trying each ``{`` in turn."""
    decoder = json.JSONDecoder()
    for attempt, match in enumerate(re.finditer(r"\{", text)):
        if attempt >= 5:  # bounds the work on brace-heavy prose
            break
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _clean(value: Any) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    out: dict[str, str] = {}
    for item in value:
        if not isinstance(item, (str, int, float)) or isinstance(item, bool):
            continue
        text = " ".join(str(item).split()).strip(" \"'`")[:MAX_KEYWORD_CHARS]
        if text:
            out.setdefault(text.casefold(), text)
    return list(out.values())[:MAX_KEYWORDS]
