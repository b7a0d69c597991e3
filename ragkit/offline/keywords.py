"""Keywords and summaries without a model.

- Keywords: the question's named things are the low-level keywords (the same
  rules as extraction) and its content words (runs of English content words,
  Chinese nouns and verbs) the high-level ones. A question with no named thing
  gets its content words as low-level keywords too, so that local search still
  has something to look up.
- Summaries: the statements themselves, richest in content words first,
  skipping those that add no new content word or number, within the request's
  ``max_tokens``; kept in their original order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from ragkit.offline.extract import MentionFinder, content_phrases, find_candidates
from ragkit.offline.answer import terms
from ragkit.offline.text import Sentence, split_sentences

MAX_KEYWORDS = 12
QUESTION_MARK = "\n\nQuestion: "
"""``KEYWORDS_PROMPT`` (``ragkit.core.prompts``) ends with the question after this (its example's
"Question:" follows a single line break)."""
STATEMENTS_MARK = "Statements:\n"
DESCRIPTION_MARK = "\n\nDescription:"
DEFAULT_SUMMARY_TOKENS = 500
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")


def question_of(prompt: str) -> str:
    at = prompt.find(QUESTION_MARK)
    return prompt[at + len(QUESTION_MARK):] if at >= 0 else prompt


def keywords_json(question: str) -> str:
    sentences = split_sentences(question) or [Sentence(question)]
    names = [c.name for c in find_candidates(sentences).values()]
    spans = [(s, e) for _, s, e in MentionFinder({n: n for n in names}).find(question)]
    phrases = [p for p, s, e in content_phrases(question) if not any(a < e and s < b for a, b in spans)]
    high = list(dict.fromkeys(phrases))[:MAX_KEYWORDS]
    low = list(dict.fromkeys(names))[:MAX_KEYWORDS] or high
    return json.dumps({"high_level_keywords": high, "low_level_keywords": low}, ensure_ascii=False)


def statements_of(prompt: str) -> list[str]:
    start = prompt.find(STATEMENTS_MARK)
    end = prompt.rfind(DESCRIPTION_MARK)
    block = prompt[start + len(STATEMENTS_MARK): end] if 0 <= start < end else prompt
    lines = (line.strip() for line in block.splitlines())
    return [line[2:].strip() if line.startswith("- ") else line for line in lines if line.strip("- ")]


def summarise(statements: list[str], max_tokens: int | None, count: Callable[[str], int],
              cut: Callable[[str, int], str]) -> str:
    budget = max_tokens or DEFAULT_SUMMARY_TOKENS
    covered: set[str] = set()
    chosen: list[int] = []
    used = 0
    words = [terms(s) | set(_NUMBER.findall(s)) for s in statements]
    for i in sorted(range(len(statements)), key=lambda i: (-len(words[i]), i)):
        cost = count(statements[i]) + 1
        if used + cost > budget or (chosen and not words[i] - covered):
            continue
        chosen.append(i)
        covered |= words[i]
        used += cost
    if not chosen and statements:
        return cut(statements[0], budget)
    return "\n".join(statements[i] for i in sorted(chosen))
