"""The entity resolution section of the benchmark report (``bench_aliases.py``'s
result, ``res["aliases"]``), apart from ``report.py`` to keep each file readable."""

from __future__ import annotations

from typing import Any

from report import fmt, table


def aliases_section(res: dict, lines: list[str]) -> None:
    a = res.get("aliases")
    if not a:
        return
    lines += [
        "## Entity resolution (ragkit only)",
        "",
        "The name rules (`ragkit/core/aliases.py`) on the labelled alias sets in `tests/fixtures/aliases`: "
        "MuSiQue passage titles and their variants (every name occurs in the data) and a Chinese and Japanese "
        "set, both written for issue 31 before the rules were tuned, half A the even lines, half B the odd. "
        "*linked*: pairs the rules call `SAME` (linked with no model call); precision and recall are theirs. "
        "*maybe*: pairs left to the model check (`[index] alias_check`); *with a perfect check*: the recall if "
        "the model decided every one of them right (no model runs here: the recall the check really reaches "
        "is not measured). Pairs whose keys are already equal (\"TEN\" and \"Ten\") are one entity before "
        "resolution and are not scored.",
        "",
    ]
    rows = []
    for name, halves in a["rules"].items():
        for half, s in halves.items():
            rows.append([name, half, str(s["pairs"]), str(s["positives"]), f"{s['linked_right']}/{s['linked']}",
                         fmt(s["precision"]), fmt(s["recall"]), f"{s['maybe_same']}/{s['maybe']}",
                         fmt(s["recall_with_perfect_check"]), str(s["equal_keys"])])
    lines += table(["set", "half", "pairs", "aliases", "linked right", "precision", "recall", "maybe (aliases)",
                    "recall with a perfect check", "equal keys (not scored)"], rows)
    cost = a["cost"]
    lines += [
        "",
        f"Indexing cost: the first {cost['docs']:,} MuSiQue passages, replayed extractions behind the simulated "
        f"LLM ({cost['latency_s']} s a call, concurrency {cost['concurrency']}), hash embedder, embedded stores; "
        "resolution off, on (rules only, the default) and on with the model check (nothing was recorded for "
        "it: the replay answers that no pair is one entity, so its calls are made and counted but link nothing).",
        "",
    ]
    lines += table(["run", "LLM calls", "of which alias checks", "calls ×off", "wall s", "wall ×off", "entities",
                    "links"], [_cost_row(name, r) for name, r in cost["runs"].items()])
    lines += [""]


def _cost_row(name: str, r: dict[str, Any]) -> list[str]:
    return [name, f"{r['llm_calls_total']:,}", str(r["llm_calls"].get("aliases", 0)), fmt(r["calls_ratio"], 2),
            fmt(r["wall_s"], 1), fmt(r["wall_ratio"], 2), f"{r['entities']:,}", f"{r['links']:,}"]
