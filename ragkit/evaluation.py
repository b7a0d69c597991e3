"""Retrieval quality on a user's own questions (``ragkit eval``).

Each question names what its answer needs, in any of three forms:
``passages`` (texts that should be in the context), ``documents`` (document
ids or the paths they were indexed from) and ``expected`` (strings the
context's chunks should hold). Every query is asked with
``only_need_context`` (no answer call; graph modes still extract keywords,
through the LLM cache), once per mode and token budget, and scored on the
context's chunks in their ranked order. Before the timed rounds each question
is asked once in every mode, untimed, so that the first mode does not carry
the keyword extraction (and cold caches) of every other one:

- ``recall``: the share of a question's items found in the context, averaged
  over questions;
- ``recall@k``: the same within the first ``k`` chunks;
- context tokens (the whole context text, the configured tokenizer) and the
  query's wall time, p50 and p95.

How an item is found, whitespace collapsed on both sides: a passage when one
chunk holds it, or when chunks inside it cover at least half of it (the
chunker split it); a document when a chunk comes from it (its id, its path, or
a path ending in ``/`` + the name given); an expected string when a chunk holds
it, letter case ignored. An item's rank is its first chunk's.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragkit.errors import InvalidValueError, describe_validation_error

DEFAULT_MODES = ("naive", "local", "global", "hybrid", "mix", "ppr")
"""The built-in modes that retrieve (``bypass`` builds no context)."""

PASSAGE_COVER = 0.5
"""Share of a passage that chunks inside it must cover for it to count as found."""

FIELDS = "question, and passages, documents or expected (lists of strings); optionally id"


class EvalQuestion(BaseModel):
    """One line of QUESTIONS.jsonl."""

    model_config = ConfigDict(extra="forbid")

    question: str
    id: str | None = None
    passages: list[str] = Field(default_factory=list)
    documents: list[str] = Field(default_factory=list)
    expected: list[str] = Field(default_factory=list)

    @field_validator("passages", "documents", "expected", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("passages", "documents", "expected")
    @classmethod
    def _not_blank(cls, value: list[str]) -> list[str]:
        if any(not squash(v) for v in value):
            raise ValueError("holds an empty string")
        return value

    @model_validator(mode="after")
    def _has_gold(self) -> EvalQuestion:
        if not self.question.strip():
            raise ValueError("question is blank")
        if not (self.passages or self.documents or self.expected):
            raise ValueError("names nothing to find: give passages, documents or expected")
        return self

    @property
    def items(self) -> int:
        return len(self.passages) + len(self.documents) + len(self.expected)


class EvalRow(BaseModel):
    """One mode at one token budget, over every question."""

    mode: str
    max_total_tokens: int
    questions: int
    recall: float
    recall_at_k: float
    k: int
    context_tokens_mean: float
    latency_p50_ms: float
    latency_p95_ms: float


class EvalReport(BaseModel):
    config: str
    """The settings file the run used (``default`` without one)."""
    workspace: str
    questions: int
    rows: list[EvalRow]


def load_questions(path: Path | str) -> list[EvalQuestion]:
    """QUESTIONS.jsonl: one JSON object per line (blank lines skipped)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a BOM (Windows editors) is not JSON
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidValueError(f"cannot read the questions file {path}: {exc}") from None
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidValueError(f"{where} is not JSON ({exc.msg}): write one object per line, {FIELDS}") from None
        if not isinstance(data, dict):
            raise InvalidValueError(f"{where} is not a JSON object: write one object per line, {FIELDS}")
        try:
            out.append(EvalQuestion.model_validate(data))
        except ValidationError as exc:
            raise InvalidValueError(f"{where}: {describe_validation_error(exc)} (fields: {FIELDS})") from None
    if not out:
        raise InvalidValueError(f"{path} holds no questions: write one JSON object per line, {FIELDS}")
    return out


def squash(text: str) -> str:
    return " ".join(text.split())


def ranks(question: EvalQuestion, chunks: Sequence[dict[str, Any]]) -> list[int | None]:
    """Per item of ``question`` (passages, documents, expected), the 0-based
    rank of the first chunk that finds it; ``None`` when none does."""
    texts = [squash(c.get("content") or "") for c in chunks]
    found: list[int | None] = [_passage_rank(squash(p), texts) for p in question.passages]
    found += [_document_rank(d, chunks) for d in question.documents]
    lowered = [t.casefold() for t in texts]
    found += [next((i for i, t in enumerate(lowered) if squash(e).casefold() in t), None) for e in question.expected]
    return found


def _passage_rank(passage: str, texts: Sequence[str]) -> int | None:
    covered = 0
    seen: set[str] = set()
    for i, text in enumerate(texts):
        if passage in text:
            return i
        if text and text in passage and text not in seen:
            seen.add(text)
            covered += len(text)
            if covered >= PASSAGE_COVER * len(passage):
                return i
    return None


def _document_rank(name: str, chunks: Sequence[dict[str, Any]]) -> int | None:
    name = name.strip()
    for i, chunk in enumerate(chunks):
        path = chunk.get("file_path") or ""
        if name in (chunk.get("doc_id"), path) or (path and path.endswith("/" + name.lstrip("/"))):
            return i
    return None


def score(question: EvalQuestion, chunks: Sequence[dict[str, Any]], k: int) -> tuple[float, float]:
    """(recall, recall@k) of one answer's context."""
    found = ranks(question, chunks)
    return (sum(r is not None for r in found) / len(found),
            sum(r is not None and r < k for r in found) / len(found))


def planned_queries(questions: int, modes: int, budgets: int, warm_up: bool = True) -> int:
    """How many queries ``evaluate`` asks (for a progress bar's total)."""
    return questions * modes * (budgets + int(warm_up))


async def evaluate(
    rag: Any,
    questions: Sequence[EvalQuestion],
    *,
    modes: Sequence[str] = DEFAULT_MODES,
    budgets: Sequence[int | None] = (None,),
    k: int = 5,
    principal: Any = None,
    config: str = "default",
    warm_up: bool = True,
    on_query: Callable[[str], None] | None = None,
    options: Mapping[str, Any] | None = None,
) -> EvalReport:
    """Every question in every mode at every budget (``None``: the default
    ``max_total_tokens``) on an opened ``RAG``; ``on_query(what)`` after each
    query (``"local, budget 4000"``, ``"local, warm-up"``). ``options``: more
    ``QueryParam`` fields for every query (``{"lexical": False}``)."""
    if k < 1:
        raise InvalidValueError(f"k must be at least 1, got {k}")
    params = [[_param(mode, budget, options or {}) for mode in modes] for budget in budgets]
    if warm_up:
        for param in params[0]:
            for q in questions:
                await rag.aquery(q.question, param, principal=principal)
                if on_query:
                    on_query(f"{param.mode}, warm-up")
    rows = []
    for of_budget in params:
        for param in of_budget:
            scores, tokens, seconds = [], [], []
            for q in questions:
                started = time.perf_counter()
                result = await rag.aquery(q.question, param, principal=principal)
                seconds.append(time.perf_counter() - started)
                scores.append(score(q, result.chunks, k))
                tokens.append(rag.tokenizer.count(result.context))
                if on_query:
                    on_query(f"{param.mode}, budget {param.max_total_tokens}")
            rows.append(_row(param.mode, param.max_total_tokens, k, scores, tokens, seconds))
    return EvalReport(config=config, workspace=rag.settings.workspace, questions=len(questions), rows=rows)


def _param(mode: str, budget: int | None, extra: Mapping[str, Any]) -> Any:
    from ragkit.schema import QueryParam

    options: dict[str, Any] = {**extra, "mode": mode, "only_need_context": True}
    if budget is not None:
        options["max_total_tokens"] = budget
    try:
        return QueryParam(**options)
    except ValidationError as exc:
        raise InvalidValueError(f"mode {mode!r}, budget {budget}: {describe_validation_error(exc)}") from None


def _row(mode: str, budget: int, k: int, scores: list[tuple[float, float]], tokens: list[int],
         seconds: list[float]) -> EvalRow:
    ms = sorted(s * 1000 for s in seconds)
    return EvalRow(
        mode=mode, max_total_tokens=budget, questions=len(scores), k=k,
        recall=round(statistics.mean(s[0] for s in scores), 4),
        recall_at_k=round(statistics.mean(s[1] for s in scores), 4),
        context_tokens_mean=round(statistics.mean(tokens), 1),
        latency_p50_ms=round(statistics.median(ms), 2),
        latency_p95_ms=round(ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))], 2),
    )


__all__ = [
    "DEFAULT_MODES", "EvalQuestion", "EvalReport", "EvalRow", "evaluate", "load_questions", "planned_queries", "ranks",
    "score",
]
