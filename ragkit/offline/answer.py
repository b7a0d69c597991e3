"""Extractive answers: the context's best-supported sentences, each with its reference.

The answer prompt (``ragkit.query.answer``) carries the context in its system
message: entity and relation lines (JSON with ``refs``) and chunk lines
``{"ref": n, "content": ...}``. Every sentence of every chunk is scored:

- question words it shares (light stems; jieba words for Chinese), each weighted
  by how rare it is among the context's sentences;
- named things of the context (or of the question) it mentions that the
  question mentions too, weighted double;
- bridge names: names of the sentences already chosen, so that a second hop is
  found ("... Project Haijia slipped" then "Gu Yao leads Project Haijia");
- a small bonus for chunks that many entities and relations cite.

Sentences are chosen greedily, best first, while they score at least a third
of the first one, up to ``max_sentences``; each is followed by its ``[n]``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import TypeGuard

from ragkit.offline import extract_en, extract_zh
from ragkit.offline.extract import MentionFinder, find_candidates
from ragkit.offline.text import has_cjk, is_content_word, split_sentences, stem

CONTEXT_MARK = "---Context---"
MIN_SCORE_RATIO = 1 / 3
SUPPORT_WEIGHT = 0.05
CONFIGURE = (
    'configure an LLM in ragkit.toml: [llm] name = "openai" (API key in OPENAI_API_KEY) or '
    'name = "ollama" (server in OLLAMA_HOST), with [llm.options] model = "..."'
)
NOTICE_EN = (
    "No generative model was used: these are the source sentences that best match the question, "
    f"quoted by ragkit's offline mode. For a written answer, {CONFIGURE}."
)
NOTICE_ZH = (
    "未使用生成式模型：以下是与问题最相关的来源原句，由 ragkit 离线模式摘录。如需生成的回答，请在 ragkit.toml 中配置 LLM："
    '[llm] name = "openai"（API 密钥放在 OPENAI_API_KEY）或 name = "ollama"（服务器地址放在 OLLAMA_HOST），'
    '并在 [llm.options] 中设置 model。'
)
NOTHING_EN = "The context has no sentence that shares words with the question."
NOTHING_ZH = "上下文中没有与问题相关的句子。"
BYPASS = (
    "ragkit's offline mode cannot answer without context: no generative model is configured. "
    f"Ask in a mode that retrieves context (local, global, hybrid, naive, mix or ppr), or {CONFIGURE}."
)
BYPASS_ZH = (
    "未配置生成式模型，ragkit 离线模式无法在没有上下文的情况下回答。请使用会检索上下文的模式"
    "（local、global、hybrid、naive、mix 或 ppr），或在 ragkit.toml 中配置 LLM："
    '[llm] name = "openai"（API 密钥放在 OPENAI_API_KEY）或 name = "ollama"（服务器地址放在 OLLAMA_HOST），'
    "并在 [llm.options] 中设置 model。"
)


def bypass(question: str) -> str:
    """The answer without context, in the question's language (Chinese or English)."""
    return BYPASS_ZH if has_cjk(question) else BYPASS

@dataclass
class _Sentence:
    text: str
    ref: int
    terms: frozenset[str]
    names: frozenset[str]


def has_context(system: str | None) -> TypeGuard[str]:
    return system is not None and CONTEXT_MARK in system


def answer(question: str, system: str, max_sentences: int) -> str:
    chunks, names, support = parse_context(system)
    question_names = {c.name for c in find_candidates(split_sentences(question)).values()}
    finder = MentionFinder({n: n for n in names | question_names}, ignore_case=True)
    sentences = _sentences(chunks, finder)
    asked_names = {n.casefold() for n, _, _ in finder.find(question)}
    chosen = _choose(sentences, terms(question), asked_names, support, max_sentences)
    zh = has_cjk(question)
    lines = [f"- {s.text} [{s.ref}]" for s in chosen] or [NOTHING_ZH if zh else NOTHING_EN]
    return "\n".join([NOTICE_ZH if zh else NOTICE_EN, "", *lines])


def parse_context(system: str) -> tuple[list[tuple[int, str]], set[str], Counter[int]]:
    """(ref, content) of the chunk lines, the names of the graph lines, and how
    many graph lines cite each ref. Lines that are not such JSON are skipped."""
    chunks: list[tuple[int, str]] = []
    names: set[str] = set()
    support: Counter[int] = Counter()
    for line in system[system.find(CONTEXT_MARK):].splitlines():
        row = _json_row(line)
        if row is None:
            continue
        if isinstance(row.get("ref"), int) and isinstance(row.get("content"), str):
            chunks.append((row["ref"], row["content"]))
            continue
        names.update(v for k in ("entity", "entity1", "entity2") if isinstance(v := row.get(k), str) and v.strip())
        refs = row.get("refs")
        support.update(r for r in (refs if isinstance(refs, list) else []) if isinstance(r, int))
    return chunks, names, support


def _json_row(line: str) -> dict | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def terms(text: str) -> frozenset[str]:
    """Stems of English content words and Chinese content words."""
    english = {stem(w.base) for w in extract_en.words_of(text) if is_content_word(w.base)}
    return frozenset(english | {w for w, _, _ in extract_zh.content_words(text)})


def _sentences(chunks: list[tuple[int, str]], finder: MentionFinder) -> list[_Sentence]:
    out: list[_Sentence] = []
    seen: set[str] = set()
    for ref, content in chunks:
        for sentence in split_sentences(content):
            key = " ".join(sentence.text.split()).casefold()
            if sentence.heading or key in seen or not _long_enough(sentence.text):
                continue
            seen.add(key)
            names = frozenset(n.casefold() for n, _, _ in finder.find(sentence.text))
            out.append(_Sentence(" ".join(sentence.text.split()), ref, terms(sentence.text), names))
    return out


def _long_enough(text: str) -> bool:
    return len(extract_en.words_of(text)) >= 4 or sum(map(has_cjk, text)) >= 8


def _choose(
    sentences: list[_Sentence], asked: frozenset[str], asked_names: set[str], support: Counter[int], limit: int
) -> list[_Sentence]:
    term_idf = _idf(Counter(t for s in sentences for t in s.terms), len(sentences))
    name_idf = _idf(Counter(e for s in sentences for e in s.names), len(sentences))
    base = [
        sum(term_idf[t] for t in asked & s.terms) + 2 * sum(name_idf[e] for e in asked_names & s.names)
        + SUPPORT_WEIGHT * math.log1p(support[s.ref])
        for s in sentences
    ]
    left = [i for i, s in enumerate(sentences) if asked & s.terms or asked_names & s.names]
    chosen: list[int] = []
    bridge: set[str] = set()
    while left and len(chosen) < limit:
        scores = {i: base[i] + sum(name_idf[e] for e in (bridge - asked_names) & sentences[i].names) for i in left}
        best = max(left, key=lambda i: (scores[i], -i))
        if chosen and scores[best] < MIN_SCORE_RATIO * base[chosen[0]]:
            break
        chosen.append(best)
        bridge |= sentences[best].names
        left.remove(best)
    return [sentences[i] for i in chosen]


def _idf(df: Counter[str], n: int) -> dict[str, float]:
    """Rare words weigh more: log(1 + n / document frequency)."""
    return {key: math.log(1 + n / count) for key, count in df.items()}
