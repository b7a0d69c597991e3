"""``ragkit eval QUESTIONS.jsonl [--mode M]... [--budget N]... [--k 5] [--compare OTHER.toml] [--json]``

Retrieval quality on the user's own workspace (``ragkit.evaluation``): per
mode and token budget, recall, recall@k, context tokens and latency. With
``--compare``, the same questions on a second configuration (other backends,
another workspace, other query settings), side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from ragkit.cli.output import print_json, table
from ragkit.cli.progress import StatusLine
from ragkit.cli.query_cmd import lexical_option, principal_from_args
from ragkit.cli.workspace import existing_loaded
from ragkit.errors import ConfigError
from ragkit.evaluation import (
    DEFAULT_MODES, EvalQuestion, EvalReport, EvalRow, evaluate, load_questions, planned_queries,
)
from ragkit.rag import RAG


BAR = 20
"""Characters of the progress bar."""


class EvalLine(StatusLine):
    """Queries asked so far, of how many, in which configuration and mode."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total, self.done, self.config = total, 0, ""

    def __call__(self, what: str) -> None:
        self.done += 1
        filled = BAR * self.done // max(self.total, 1)
        bar = "█" * filled + "░" * (BAR - filled)
        self.show(f"eval{self.config}: {bar} {self.done}/{self.total} queries ({what})")


async def _run(args: argparse.Namespace, questions: list[EvalQuestion], line: EvalLine) -> list[EvalReport]:
    principal = principal_from_args(args)
    # Both configurations are checked before the first query: a wrong --compare
    # file fails at once, not after the first one's whole run.
    configs = [existing_loaded(c) for c in [args.config] + ([args.compare] if args.compare else [])]
    reports = []
    for n, loaded in enumerate(configs):
        line.config = f" [{n + 1}/{len(configs)}]" if len(configs) > 1 else ""
        async with RAG(loaded.settings) as rag:
            reports.append(await evaluate(
                rag, questions, modes=args.modes or DEFAULT_MODES, budgets=args.budgets or [None], k=args.k,
                principal=principal, config=str(loaded.file) if loaded.file else "no settings file", on_query=line,
                options=lexical_option(args),
            ))
    return reports


def run(args: argparse.Namespace) -> int:
    if args.compare and not os.path.isfile(args.compare):
        raise ConfigError(f"--compare {args.compare}: no such settings file; give the other configuration's ragkit.toml")
    questions = load_questions(args.questions)
    configs = 2 if args.compare else 1
    per_config = planned_queries(len(questions), len(args.modes or DEFAULT_MODES), len(args.budgets or [None]))
    line = EvalLine(configs * per_config)
    try:
        reports = asyncio.run(_run(args, questions, line))
    finally:
        line.finish()
    if args.json:
        print_json({"questions": len(questions), "reports": [r.model_dump(mode="json") for r in reports]})
    else:
        print(_table(reports))
    return 0


def _table(reports: list[EvalReport]) -> str:
    k = reports[0].rows[0].k
    if len(reports) == 1:
        report = reports[0]
        head = f"{report.questions} questions, workspace {report.workspace!r} ({report.config})\n"
        return head + table(
            ["mode", "budget", "recall", f"recall@{k}", "context tokens", "p50 ms", "p95 ms"],
            [[r.mode, r.max_total_tokens, f"{r.recall:.3f}", f"{r.recall_at_k:.3f}", f"{r.context_tokens_mean:.0f}",
              f"{r.latency_p50_ms:.1f}", f"{r.latency_p95_ms:.1f}"] for r in report.rows],
        )
    a, b = reports
    head = (f"{a.questions} questions; A: workspace {a.workspace!r} ({a.config}), "
            f"B: workspace {b.workspace!r} ({b.config}); delta = B - A\n")
    return head + table(
        ["mode", "budget", "recall A", "recall B", "delta", f"recall@{k} A", f"recall@{k} B", "delta",
         "tokens A", "tokens B", "p50 ms A", "p50 ms B"],
        [_pair(x, y) for x, y in zip(a.rows, b.rows)],
    )


def _pair(x: EvalRow, y: EvalRow) -> list[str | int]:
    return [x.mode, x.max_total_tokens, f"{x.recall:.3f}", f"{y.recall:.3f}", f"{y.recall - x.recall:+.3f}",
            f"{x.recall_at_k:.3f}", f"{y.recall_at_k:.3f}", f"{y.recall_at_k - x.recall_at_k:+.3f}",
            f"{x.context_tokens_mean:.0f}", f"{y.context_tokens_mean:.0f}",
            f"{x.latency_p50_ms:.1f}", f"{y.latency_p50_ms:.1f}"]
