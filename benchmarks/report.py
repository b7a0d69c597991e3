"""Renders a side-by-side result (``benchmarks/results/<name>.json``) as Markdown
tables and PNG plots.

    python benchmarks/report.py benchmarks/results/bench.json [--md docs/benchmarks.md] [--no-plots]

Runs in LightRAG's venv (it holds matplotlib; ``bench.py`` calls it) or any
Python with matplotlib; it imports neither system. Hand-written findings in
``benchmarks/findings.md``, when present, are appended under their own heading.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODES = ["naive", "local", "global", "hybrid", "mix"]
RAGKIT_ONLY = ["ppr"]
"""ragkit's modes that LightRAG lacks: shown on their own rows, and in the running for ragkit's best."""


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def ratio(a: float | None, b: float | None, digits: int = 2) -> str:
    if a is None or b is None or not b:
        return "-"
    return f"{a / b:.{digits}f}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def targets_section(res: dict, lines: list[str]) -> None:
    """Issue 8's targets against this run's figures."""
    rows = []
    q, t = res.get("quality"), res.get("throughput")
    if q:
        rk, lr = q["ragkit"]["scores"], q["lightrag"]["scores"]
        n = res["settings"]["budgets"]["chunk_top_k"]
        best_rk = max((m for m in MODES + RAGKIT_ONLY if m in rk), key=lambda m: rk[m]["recall"])
        best_lr = max((m for m in MODES if m in lr), key=lambda m: lr[m]["recall"])
        d_lr = 100 * (rk[best_rk]["recall"] - lr[best_lr]["recall"])
        d_naive = 100 * (rk[best_rk]["recall"] - rk["naive"]["recall"])
        best_rk_n = max((m for m in MODES + RAGKIT_ONLY if m in rk), key=lambda m: rk[m][f"recall@{n}"])
        best_lr_n = max((m for m in MODES if m in lr), key=lambda m: lr[m][f"recall@{n}"])
        d_n = 100 * (rk[best_rk_n][f"recall@{n}"] - lr[best_lr_n][f"recall@{n}"])
        rows.append(["supporting-passage recall: ragkit best mode − LightRAG best mode", "≥ +10 points",
                     f"{d_lr:+.1f} (`{best_rk}` {rk[best_rk]['recall']:.3f} vs `{best_lr}` {lr[best_lr]['recall']:.3f})",
                     "met" if d_lr >= 10 else "not met"])
        rows.append(["… ragkit best mode − ragkit `naive`", "≥ +10 points", f"{d_naive:+.1f}",
                     "met" if d_naive >= 10 else "not met"])
        rows.append([f"… at the same number of chunks ({n}, recall@{n})", "(not a target)",
                     f"{d_n:+.1f} (`{best_rk_n}` {rk[best_rk_n][f'recall@{n}']:.3f} vs `{best_lr_n}` "
                     f"{lr[best_lr_n][f'recall@{n}']:.3f})", "see §1"])
        worst = max((m for m in MODES if m in rk and m in lr), key=lambda m: rk[m]["p50_ms"] / lr[m]["p50_ms"])
        r = rk[worst]["p50_ms"] / lr[worst]["p50_ms"]
        rows.append(["query context p50, ragkit / LightRAG, every mode", "≤ 0.5",
                     ", ".join(f"{m} {rk[m]['p50_ms'] / lr[m]['p50_ms']:.2f}" for m in MODES if m in rk and m in lr),
                     "met" if r <= 0.5 else f"not met (worst: {worst})"])
        fw = [m for m in MODES if m in rk and m in lr and "framework_p50_ms" in rk[m] and "framework_p50_ms" in lr[m]]
        if fw:
            rows.append(["… the same without the time inside the embedder (the shared MiniLM)", "(not a target)",
                         ", ".join(f"{m} {rk[m]['framework_p50_ms'] / lr[m]['framework_p50_ms']:.2f}" for m in fw),
                         "see §3"])
        on_torch = [m for m in MODES if f"{m}/torch" in rk and m in lr]
        if on_torch:
            rows.append(["… ragkit with MiniLM on torch, as LightRAG runs it", "(not a target)",
                         ", ".join(f"{m} {rk[f'{m}/torch']['p50_ms'] / lr[m]['p50_ms']:.2f}" for m in on_torch),
                         "see §3"])
    if q:
        rows += equal_cost_targets(q["ragkit"]["scores"], q["lightrag"]["scores"])
    if t:
        a, c = t["latency"]["ragkit"], t["latency"]["lightrag"]
        w = a["wall_s"] / c["wall_s"]
        rows.append([f"indexing wall, ragkit / LightRAG ({t['prefix']} passages)", "≤ 0.5", f"{w:.2f}",
                     "met" if w <= 0.5 else "not met"])
        e = [a.get("efficiency") or 0, t["latency"]["ragkit_all"].get("efficiency") or 0]
        rows.append(["ragkit indexing efficiency", "≥ 0.9",
                     f"{e[0]:.2f} ({t['prefix']} passages), {e[1]:.2f} (all)",
                     "met" if min(e) >= 0.9 else "not met"])
        rows += indexing_cost_targets(res)
    if rows:
        lines += ["## Targets (issues 8 and 17) in this run", ""]
        lines += table(["target", "wanted", "measured", ""], rows)
        lines += [""]


MIX_SIZED = {
    "ppr@lightrag-mix": "ppr at LightRAG mix's size (20 chunks)",
    "ppr@lightrag-mix-tokens": "ppr at LightRAG mix's tokens (chunk bound lifted to 60)",
}
"""ppr runs at LightRAG mix's mean context (``bench_ragkit.budget_runs``)."""


def indexing_cost_targets(res: dict) -> list[list[str]]:
    """Issue 17's indexing targets: the side-by-side throughput run (a prefix,
    gleaning as set) and the quality run's indexes (the whole corpus), each at
    equal gleaning."""
    rows = []
    t = res.get("throughput")
    if t:
        rows += cost_rows(t["latency"]["ragkit"], t["latency"]["lightrag"], f"{t['prefix']:,} passages")
    full = full_corpus_cost(res)
    if full:
        a, c, what = full
        rows += cost_rows(a, c, what)
    return rows


def tokens(run: dict, role: str | None = None) -> int | None:
    """A run's input + output tokens, in all or for one role (None: not counted)."""
    if role is None:
        return run["input_tokens"] + run["output_tokens"]
    counts = run.get("tokens_by_role", {}).get(role)
    return counts["input"] + counts["output"] if counts else None


def cost_rows(a: dict, c: dict, what: str) -> list[list[str]]:
    """Summary calls and tokens, ragkit against LightRAG (dicts with ``llm_calls``, ``input_tokens``, ``output_tokens``)."""
    sa, sc = a["llm_calls"].get("summary", 0), c["llm_calls"].get("summary", 0)
    ta, tc = tokens(a), tokens(c)
    return [
        [f"indexing summary calls, ragkit vs LightRAG ({what})", "≤ LightRAG's",
         f"{sa} vs {sc}", "met" if sa <= sc else "not met"],
        [f"indexing tokens (in + out), ragkit / LightRAG ({what})", "≤ 0.9",
         f"{ta / tc:.2f} ({ta:,} vs {tc:,})", "met" if ta <= 0.9 * tc else "not met"],
    ]


def full_corpus_cost(res: dict) -> tuple[dict, dict, str] | None:
    """The quality run's indexing of every passage by both systems, as cost
    rows (runs that reused a cached index, or predate the count, have none)."""
    q = res.get("quality")
    if not q or not q["ragkit"].get("index_tokens") or not q["lightrag"].get("index_tokens"):
        return None
    a = {"llm_calls": q["ragkit"]["llm_calls"], **q["ragkit"]["index_tokens"]}
    c = {"llm_calls": {"extraction" if k == "extract" else k: v for k, v in q["lightrag"]["llm_calls"].items()},
         **q["lightrag"]["index_tokens"]}
    gleaned = [bool(d["tokens_by_role"].get("gleaning")) for d in (a, c)]
    what = f"all {q['ragkit']['documents']:,} passages, " + (
        "no gleaning" if not any(gleaned) else "gleaning" if all(gleaned) else "gleaning in one system only")
    return a, c, what


def equal_cost_targets(rk: dict, lr: dict) -> list[list[str]]:
    """Issue 17's retrieval targets, when the run measured them."""
    rows = []
    sweep = sorted({int(k.split("@")[1]) for k in rk if "@" in k and k.split("@")[1].isdigit()})
    if sweep:
        below, unfilled = [], []
        for b in sweep:
            for m in MODES[1:] + RAGKIT_ONLY:
                x, naive = rk.get(f"{m}@{b}"), rk.get(f"naive@{b}")
                if x is None or naive is None:
                    continue
                if x["recall"] < naive["recall"]:
                    below.append(f"{m}@{b} {x['recall']:.3f} < {naive['recall']:.3f}")
                if x.get("fill_when_bound") is not None and x["fill_when_bound"] < 0.85:
                    unfilled.append(f"{m}@{b} {x['fill_when_bound']:.2f}")
        rows.append([f"every graph mode's recall ≥ `naive`'s at budgets {', '.join(map(str, sweep))}", "all",
                     "; ".join(below) or "all", "met" if not below else "not met"])
        rows.append(["… context fill when material was left out for the budget", "≥ 0.85",
                     "; ".join(unfilled) or "all ≥ 0.85", "met" if not unfilled else "not met"])
    equal = [m for m in MODES + RAGKIT_ONLY if f"{m}@lightrag" in rk] + [k for k in MIX_SIZED if k in rk]
    if equal and "mix" in lr:
        limit = lr["mix"]["context_tokens_mean"]
        keys = [k if "@" in k else f"{k}@lightrag" for k in equal]
        fitting = [k for k in keys if rk[k]["context_tokens_mean"] <= limit]
        best_lr = max((m for m in MODES if m in lr), key=lambda m: lr[m]["recall"])
        if fitting:
            best = max(fitting, key=lambda k: rk[k]["recall"])
            x, d = rk[best], 100 * (rk[best]["recall"] - lr[best_lr]["recall"])
            by_half = {h: 100 * (x.get(f"recall_{h}", 0) - max(lr[m].get(f"recall_{h}", 0) for m in MODES if m in lr))
                       for h in ("A", "B")}
            rows.append([f"at a context ≤ LightRAG mix's ({limit:,} tokens): ragkit best − LightRAG best",
                         "≥ +10 points", f"{d:+.1f} (`{best}` {x['recall']:.3f}, {x['context_tokens_mean']:,} tokens, "
                         f"vs `{best_lr}` {lr[best_lr]['recall']:.3f}); half A {by_half['A']:+.1f}, "
                         f"half B {by_half['B']:+.1f} (each half against LightRAG's best on it)",
                         "met" if d >= 10 and min(by_half.values()) >= 10 else "not met"])
            halves = [x.get("recall@5_A"), x.get("recall@5_B")]
            ok = all(h is not None and h >= 0.72 for h in halves)
            rows.append(["… its recall@5 on both halves (A, B)", "≥ 0.72",
                         f"{fmt(halves[0])}, {fmt(halves[1])}", "met" if ok else "not met"])
    return rows


def quality_section(res: dict, lines: list[str]) -> None:
    q = res.get("quality")
    if not q:
        return
    rk, lr = q["ragkit"]["scores"], q["lightrag"]["scores"]
    s = res["settings"]
    b = s["budgets"]
    lines += [
        "## 1. Retrieval quality",
        "",
        f"{s['questions']} questions ({s['questions_file']}), {q['ragkit']['documents']:,} passages indexed by ragkit "
        f"(one document each) and {q['lightrag']['documents']:,} by LightRAG ({q['lightrag']['insert_batch']} "
        "passages per LightRAG document, split back into one chunk per passage; see *How it was run*). "
        "Embedder: MiniLM (all-MiniLM-L6-v2) for both (ragkit's on ONNX Runtime, LightRAG's on torch; "
        f"the same vectors to 1e-6). Budgets for both: top_k {b['top_k']}, chunk_top_k "
        f"{b['chunk_top_k']}, entity {b['max_entity_tokens']:,}, relation {b['max_relation_tokens']:,}, total "
        f"{b['max_total_tokens']:,} tokens. Identical keywords for both.",
        "",
        "Recall = supporting passages found in the context / supporting passages (mean over questions); "
        "all = fraction of questions with every supporting passage; @k = recall within the first k "
        "chunks of the ranked chunk list; chunks = mean chunks in the context; tokens = mean context tokens "
        "(cl100k_base, the whole context string). "
        "Δ is ragkit − LightRAG in points (×100).",
        "",
    ]
    n = b["chunk_top_k"]
    rows = []
    for m in MODES:
        if m not in rk or m not in lr:
            continue
        a, c = rk[m], lr[m]
        rows.append([
            m,
            f"{a['recall']:.3f}", f"{c['recall']:.3f}", f"{100 * (a['recall'] - c['recall']):+.1f}",
            f"{a['all_supporting']:.2f}", f"{c['all_supporting']:.2f}",
            f"{a['recall@2']:.3f}", f"{c['recall@2']:.3f}",
            f"{a['recall@5']:.3f}", f"{c['recall@5']:.3f}",
            f"{a[f'recall@{n}']:.3f}", f"{c[f'recall@{n}']:.3f}",
            f"{a['chunks_mean']:.0f}", f"{c['chunks_mean']:.0f}",
            fmt(a["context_tokens_mean"]), fmt(c["context_tokens_mean"]),
            ratio(a["context_tokens_mean"], c["context_tokens_mean"]),
        ])
    for m in RAGKIT_ONLY:
        if m in rk:
            a = rk[m]
            rows.append([f"{m} (ragkit only)", f"{a['recall']:.3f}", "—", "", f"{a['all_supporting']:.2f}", "—",
                         f"{a['recall@2']:.3f}", "—", f"{a['recall@5']:.3f}", "—", f"{a[f'recall@{n}']:.3f}", "—",
                         f"{a['chunks_mean']:.0f}", "—", fmt(a["context_tokens_mean"]), "—", ""])
    lines += table(["mode", "recall ragkit", "recall LightRAG", "Δ", "all ragkit", "all LightRAG",
                    "@2 ragkit", "@2 LightRAG", "@5 ragkit", "@5 LightRAG", f"@{n} ragkit", f"@{n} LightRAG",
                    "chunks ragkit", "chunks LightRAG", "tokens ragkit", "tokens LightRAG", "tokens ratio"], rows)
    lines += [
        "",
        f"@{n} is recall within the first {n} chunks. `chunk_top_k` ({n}) bounds the chunks of the context "
        "in both systems, from every source of chunks (vector hits, chunks cited by graph items, chunks "
        "reached by the walk), fused by rank in ragkit.",
    ]
    best_rk = max((m for m in MODES + RAGKIT_ONLY if m in rk), key=lambda m: rk[m]["recall"])
    best_lr = max((m for m in MODES if m in lr), key=lambda m: lr[m]["recall"])
    lines += [
        "",
        f"Best mode: ragkit `{best_rk}` {rk[best_rk]['recall']:.3f}, LightRAG `{best_lr}` "
        f"{lr[best_lr]['recall']:.3f} ({100 * (rk[best_rk]['recall'] - lr[best_lr]['recall']):+.1f} points); "
        f"ragkit's own dense `naive` {rk['naive']['recall']:.3f} "
        f"({100 * (rk[best_rk]['recall'] - rk['naive']['recall']):+.1f} points). Issue 8's target: at least "
        "+10 points over both.",
        "",
        "![recall per mode](benchmarks/quality.png)",
        "",
    ]
    variants = [m for m in MODES if f"{m}/similarity" in rk]
    if variants:
        lines += [
            "ragkit's graph modes again on the same index with `QueryParam(chunk_ranking=\"similarity\")` "
            "(graph-found chunks ordered by MiniLM similarity to the question instead of by how many found items "
            "cite them; LightRAG's default `kg_chunk_pick_method` VECTOR is the analogue):",
            "",
        ]
        rows = []
        for m in variants:
            for label, key in (("support (default)", m), ("similarity", f"{m}/similarity")):
                x = rk[key]
                rows.append([m, label, f"{x['recall']:.3f}", f"{x['all_supporting']:.2f}", f"{x['recall@2']:.3f}",
                             f"{x['recall@5']:.3f}", f"{x[f'recall@{n}']:.3f}", f"{x['chunks_mean']:.0f}",
                             fmt(x["context_tokens_mean"]), fmt(x["p50_ms"], 1)])
        lines += table(["mode", "chunk ranking", "recall", "all", "@2", "@5", f"@{n}", "chunks", "tokens",
                        "p50 ms"], rows)
        lines += [""]


def equal_cost_section(res: dict, lines: list[str]) -> None:
    """Issue 17: recall at LightRAG's context size, and at fixed total budgets."""
    q = res.get("quality")
    if not q:
        return
    rk, lr = q["ragkit"]["scores"], q["lightrag"]["scores"]
    equal = [m for m in MODES + RAGKIT_ONLY if f"{m}@lightrag" in rk]
    sweep = sorted({int(k.split("@")[1]) for k in rk if "@" in k and k.split("@")[1].isdigit()})
    if not equal and not sweep:
        return
    lines += ["## 1b. At equal cost", "",
              "The questions are split by position in the questions file: even positions are half A (every "
              "ranking choice was made on it), odd positions half B (confirmation only). Tokens are context "
              "tokens (cl100k_base); *budget* is `max_total_tokens`, which also holds the answer prompt's "
              "system text and question, so ragkit's context is smaller than its budget.", ""]
    if equal:
        rows = []
        for m in equal:
            a, c = rk[f"{m}@lightrag"], lr.get(m, {})
            rows.append([m, fmt(a["max_total_tokens"]), fmt(c.get("context_tokens_mean")), fmt(a["context_tokens_mean"]),
                         fmt(c.get("chunks_mean"), 1), fmt(a["chunks_mean"], 1),
                         fmt(c.get("recall")), fmt(a["recall"]), f"{100 * (a['recall'] - c.get('recall', 0)):+.1f}",
                         fmt(a.get("recall_A")), fmt(a.get("recall_B")), fmt(a["recall@5"]),
                         fmt(a.get("recall@5_A")), fmt(a.get("recall@5_B"))])
        for key, label in MIX_SIZED.items():
            if key not in rk or "mix" not in lr:
                continue
            a, c = rk[key], lr["mix"]
            rows.append([label, fmt(a["max_total_tokens"]), fmt(c["context_tokens_mean"]),
                         fmt(a["context_tokens_mean"]), fmt(c["chunks_mean"], 1), fmt(a["chunks_mean"], 1),
                         fmt(c["recall"]), fmt(a["recall"]), f"{100 * (a['recall'] - c['recall']):+.1f}",
                         fmt(a.get("recall_A")), fmt(a.get("recall_B")), fmt(a["recall@5"]),
                         fmt(a.get("recall@5_A")), fmt(a.get("recall@5_B"))])
        lines += ["Each ragkit mode with `max_total_tokens` = LightRAG's measured mean context for that mode "
                  "(other budgets as in §1):", ""]
        lines += table(["mode", "budget", "tokens LightRAG", "tokens ragkit", "chunks LightRAG", "chunks ragkit",
                        "recall LightRAG", "recall ragkit", "Δ", "ragkit A", "ragkit B", "@5 ragkit", "@5 A",
                        "@5 B"], rows)
        lines += [""]
    if sweep:
        rows = []
        for m in MODES + RAGKIT_ONLY:
            for b in sweep:
                x = rk.get(f"{m}@{b}")
                if x is None:
                    continue
                naive = rk.get(f"naive@{b}", {})
                rows.append([m, fmt(b), fmt(x["recall"]), fmt(x.get("recall_A")), fmt(x.get("recall_B")),
                             "yes" if m == "naive" or x["recall"] >= naive.get("recall", 0) else "**no**",
                             fmt(x["recall@5"]), fmt(x["chunks_mean"], 1), fmt(x["context_tokens_mean"]),
                             fmt(x.get("fill")), fmt(x.get("budget_bound_share"), 2), fmt(x.get("fill_when_bound"))])
        lines += ["Every mode at fixed total budgets (other budgets as in §1). *fill* = mean prompt tokens / "
                  "budget; *bound* = share of questions where found material (candidate chunks within "
                  "`chunk_top_k`, supported entities or relations) was left out for the budget; *fill when bound* "
                  "= fill over those questions (the target: ≥ 0.85).", ""]
        lines += table(["mode", "budget", "recall", "A", "B", "≥ naive", "@5", "chunks", "tokens", "fill", "bound",
                        "fill when bound"], rows)
        lines += [""]


def throughput_section(res: dict, lines: list[str]) -> None:
    t = res.get("throughput")
    if not t:
        return
    s = res["settings"]
    lat, zero = t["latency"], t["zero_latency"]
    a, c, full = lat["ragkit"], lat["lightrag"], lat["ragkit_all"]
    za, zc, zfull = zero["ragkit"], zero["lightrag"], zero["ragkit_all"]
    lines += [
        "## 2. Indexing throughput",
        "",
        f"The first {t['prefix']:,} passages, one document each, for both systems (LightRAG as shipped; its cost "
        f"grows with the square of the corpus, so the side-by-side runs use this prefix), and all "
        f"{full['docs']:,} passages for ragkit alone. Simulated LLM: {s['latency_s']} s ± {s['jitter_s']} s "
        f"(uniform, same seed for both), concurrency {s['concurrency']} (ragkit `llm_concurrency`, LightRAG "
        f"`llm_model_max_async` and `max_parallel_insert`), gleaning {s['gleaning']} for both, the same "
        "feature-hashing embedder (384 dimensions) for both, embedded default stores. Tokens: cl100k_base of "
        "every call's system prompt, history and prompt (input) and answer (output). Efficiency = "
        "(calls × mean latency / concurrency) / wall. Peak RSS: of the run's own process.",
        "",
    ]

    def calls(x: dict) -> str:
        return f"{x['llm_calls_total']:,} ({', '.join(f'{k} {v}' for k, v in x['llm_calls'].items() if v)})"

    rows = [
        ["LLM calls", calls(a), calls(c), ratio(a["llm_calls_total"], c["llm_calls_total"]), calls(full)],
        ["input tokens", fmt(a["input_tokens"]), fmt(c["input_tokens"]), ratio(a["input_tokens"], c["input_tokens"]),
         fmt(full["input_tokens"])],
        ["output tokens", fmt(a["output_tokens"]), fmt(c["output_tokens"]),
         ratio(a["output_tokens"], c["output_tokens"]), fmt(full["output_tokens"])],
        ["wall (s)", fmt(a["wall_s"], 1), fmt(c["wall_s"], 1), ratio(a["wall_s"], c["wall_s"]), fmt(full["wall_s"], 1)],
        ["ideal (s)", fmt(a.get("ideal_s"), 1), fmt(c.get("ideal_s"), 1), "", fmt(full.get("ideal_s"), 1)],
        ["efficiency", fmt(a.get("efficiency"), 2), fmt(c.get("efficiency"), 2),
         ratio(a.get("efficiency"), c.get("efficiency")), fmt(full.get("efficiency"), 2)],
        ["peak LLM calls in flight", fmt(a["peak_llm_in_flight"]), fmt(c["peak_llm_in_flight"]), "",
         fmt(full["peak_llm_in_flight"])],
        ["peak RSS (MiB)", fmt(a["peak_rss_mib"], 0), fmt(c["peak_rss_mib"], 0), ratio(a["peak_rss_mib"], c["peak_rss_mib"]),
         fmt(full["peak_rss_mib"], 0)],
        ["zero latency: wall (s)", fmt(za["wall_s"], 1), fmt(zc["wall_s"], 1), ratio(za["wall_s"], zc["wall_s"]),
         fmt(zfull["wall_s"], 1)],
        ["zero latency: chunks/s", fmt(za["chunks_per_s"], 1), fmt(zc["chunks_per_s"], 1),
         ratio(za["chunks_per_s"], zc["chunks_per_s"]), fmt(zfull["chunks_per_s"], 1)],
        ["zero latency: chunks per CPU-s", fmt(za["chunks_per_cpu_s"], 1), fmt(zc["chunks_per_cpu_s"], 1),
         ratio(za["chunks_per_cpu_s"], zc["chunks_per_cpu_s"]), fmt(zfull["chunks_per_cpu_s"], 1)],
        ["zero latency: peak RSS (MiB)", fmt(za["peak_rss_mib"], 0), fmt(zc["peak_rss_mib"], 0),
         ratio(za["peak_rss_mib"], zc["peak_rss_mib"]), fmt(zfull["peak_rss_mib"], 0)],
    ]
    rows[3:3] = role_token_rows(a, c, full)
    lines += table(["", f"ragkit ({t['prefix']:,})", f"LightRAG ({t['prefix']:,})", "ragkit / LightRAG",
                    f"ragkit (all {full['docs']:,})"], rows)
    lines += ["", "![indexing wall time](benchmarks/throughput.png)", ""]
    full_corpus_section(res, lines)


def full_corpus_section(res: dict, lines: list[str]) -> None:
    """Both systems' LLM cost for the whole corpus, from the quality run's indexes."""
    full = full_corpus_cost(res)
    if not full:
        return
    a, c, what = full
    lines += [
        "### The whole corpus, both systems",
        "",
        f"The indexes of §1 ({what}; LightRAG with {res['quality']['lightrag'].get('insert_batch', '?')} passages "
        "per document, split back into one chunk per passage, so that both extract the same chunks), built in "
        "the same run: LLM calls and cl100k_base "
        "tokens (input + output) per role.",
        "",
    ]
    pairs = [("LLM calls", sum(a["llm_calls"].values()), sum(c["llm_calls"].values())),
             ("… summary calls", a["llm_calls"].get("summary", 0), c["llm_calls"].get("summary", 0)),
             ("tokens (in + out)", tokens(a), tokens(c))]
    pairs += [(f"… {role} tokens", tokens(a, role) or 0, tokens(c, role) or 0)
              for role in ROLES if tokens(a, role) or tokens(c, role)]
    rows = [[name, fmt(x), fmt(y), ratio(x, y)] for name, x, y in pairs]
    lines += table(["", "ragkit", "LightRAG", "ragkit / LightRAG"], rows)
    lines += [""]


ROLES = ("extraction", "gleaning", "summary")


def role_token_rows(a: dict, c: dict, full: dict) -> list[list[str]]:
    """Input + output tokens per role (runs before the per-role count have none)."""
    rows = []
    for role in ROLES:
        x, y, z = (tokens(d, role) for d in (a, c, full))
        if x is not None or y is not None:
            rows.append([f"… {role} tokens (in + out)", fmt(x), fmt(y), ratio(x, y), fmt(z)])
    return rows


def latency_section(res: dict, lines: list[str]) -> None:
    q = res.get("quality")
    if not q:
        return
    rk, lr = q["ragkit"]["scores"], q["lightrag"]["scores"]
    lines += [
        "## 3. Query latency",
        "",
        "Context building only (no answer call; user-supplied keywords, so no keyword call either), MiniLM "
        "embedding of the query included, on the quality run's indexes, questions asked one at a time, "
        "all questions of a mode in a row. Milliseconds.",
        "",
    ]
    rows = []
    for m in MODES:
        if m in rk and m in lr:
            rows.append([m, fmt(rk[m]["p50_ms"], 1), fmt(lr[m]["p50_ms"], 1), ratio(rk[m]["p50_ms"], lr[m]["p50_ms"]),
                         fmt(rk[m]["p95_ms"], 1), fmt(lr[m]["p95_ms"], 1), ratio(rk[m]["p95_ms"], lr[m]["p95_ms"])])
    rows += [[f"{m} (ragkit only)", fmt(rk[m]["p50_ms"], 1), "—", "", fmt(rk[m]["p95_ms"], 1), "—", ""]
             for m in RAGKIT_ONLY if m in rk]
    lines += table(["mode", "p50 ragkit", "p50 LightRAG", "p50 ratio", "p95 ragkit", "p95 LightRAG", "p95 ratio"], rows)
    fw = [m for m in MODES if m in rk and m in lr and "framework_p50_ms" in rk[m] and "framework_p50_ms" in lr[m]]
    if fw:
        lines += [
            "",
            "The same queries without the time spent inside the embedder (both systems call MiniLM, ragkit "
            "through ONNX Runtime and LightRAG through sentence-transformers on torch; each worker times its "
            "embedding function): what the framework "
            "itself costs. LightRAG may embed two texts at once in separate threads, in which case its "
            "subtracted time exceeds the wall time it adds, which favours LightRAG here.",
            "",
        ]
        lines += table(["mode", "p50 ragkit", "p50 LightRAG", "p50 ratio", "embedding p50 ragkit",
                        "embedding p50 LightRAG"],
                       [[m, fmt(rk[m]["framework_p50_ms"], 1), fmt(lr[m]["framework_p50_ms"], 1),
                         ratio(rk[m]["framework_p50_ms"], lr[m]["framework_p50_ms"]),
                         fmt(rk[m]["embedding_p50_ms"], 1), fmt(lr[m]["embedding_p50_ms"], 1)] for m in fw])
    on_torch = [m for m in MODES if f"{m}/torch" in rk and m in lr]
    if on_torch:
        lines += [
            "",
            f"ragkit's embedder runs MiniLM with ONNX Runtime (`backend = \"{q['ragkit'].get('embedder_backend')}\"` "
            "of ragkit-sentence-transformers, same vectors to 1e-6); LightRAG's worker calls sentence-transformers "
            "on torch. The same queries on the same index with ragkit's embedder on torch instead:",
            "",
        ]
        lines += table(["mode", "p50 ragkit (torch)", "p50 LightRAG", "p50 ratio", "p95 ragkit (torch)",
                        "p95 LightRAG", "p95 ratio"],
                       [[m, fmt(rk[f"{m}/torch"]["p50_ms"], 1), fmt(lr[m]["p50_ms"], 1),
                         ratio(rk[f"{m}/torch"]["p50_ms"], lr[m]["p50_ms"]), fmt(rk[f"{m}/torch"]["p95_ms"], 1),
                         fmt(lr[m]["p95_ms"], 1), ratio(rk[f"{m}/torch"]["p95_ms"], lr[m]["p95_ms"])]
                        for m in on_torch])
    lines += ["", "![query latency](benchmarks/latency.png)", ""]


def warm_up_note(runs: list[dict]) -> str:
    """How the scale runs' timed round was preceded: an untimed round of every
    question in every mode (``--warm-up``), or nothing (runs made before it)."""
    cold = [f"{x.get('backend', 'embedded')} ×{x['factor']}" for x in runs
            if "failed" not in x and not x.get("warm_up_rounds")]
    note = ("The timed round follows one untimed round of every question in every mode (what a server "
            "settles or fills after the bulk load is not timed)")
    return note + (f"; runs made before that existed, timed straight after indexing: {', '.join(cold)}." if cold
                   else ".")


def scale_section(res: dict, lines: list[str]) -> None:
    s = res.get("scale")
    if not s:
        return
    lines += [
        "## 4. Scale (ragkit, embedded default stores and server backends)",
        "",
        "Synthetic expansion ×N: copy k (1 ≤ k < N) of every passage is the passage under the title line "
        "`\"{title} [copy k]\"`, and its replayed extraction is the recorded one with every entity name suffixed "
        "`\" [k]\"` (in names, relation endpoints and descriptions), so each copy adds its own nodes and edges and "
        "the graph grows N-fold with the same shape. Zero-latency replay LLM, feature-hashing embedder, "
        "one document per passage; the same questions and keywords as in part 1 (the originals are copy 0). "
        "Backends: `embedded` is SQLite (KV, doc status and, the default since 2026-12-05, the graph's node "
        "and edge tables) and numpy (vectors) in the working folder; rows marked *NetworkX graph* were measured "
        "before that, with the graph held in memory by NetworkX and saved as JSON (as were the embedded runs "
        "behind the servers' ratios below, until those are re-run); `servers` is Redis (KV, doc status), a Chroma server (vectors) and the Bolt server (graph, "
        "FalkorDB standing in for Neo4j), all on loopback, started by the harness. Peak RSS is ragkit's own "
        "process (the servers' memory is not included). Query p50 in ms. " + warm_up_note(s),
        "",
    ]
    rows, notes = [], []
    for x in s:
        backend = x.get("backend", "embedded")
        if backend == "postgres":  # a table of its own (report_postgres.py)
            continue
        if "failed" in x:
            rows.append([backend, f"×{x['factor']}", "not finished (below)"] + ["-"] * 9)
            notes.append(f"{backend} ×{x['factor']}: {x['failed']}.")
            continue
        m = x["modes"]
        label = backend if backend != "embedded" or graph_store(x) == "sqlite" else "embedded, *NetworkX graph*"
        rows.append([label, f"×{x['factor']}", fmt(x["docs"]), fmt(x["index_s"], 1), fmt(x["chunks_per_s"], 1),
                     fmt(x["peak_rss_mib"], 0), fmt(x["disk_mib"], 0) if backend == "embedded" else "on the servers"]
                    + [fmt(m[k]["latency"]["p50_ms"], 1) for k in MODES])
    lines += table(["backend", "corpus", "passages", "index (s)", "chunks/s", "peak RSS (MiB)", "disk (MiB)"]
                   + [f"{k} p50" for k in MODES], rows)
    lines += [""] + notes + (["" ] if notes else [])
    from report_postgres import postgres_scale_section, target_verdict

    servers = [x for x in s if x.get("backend") == "servers" and "failed" not in x]
    for x in servers:
        if x.get("reference"):  # only against the embedded run made just before, under the same load
            ref = x["reference"]["p50_ms"]
            lines += [f"p50 servers / embedded at ×{x['factor']} (the embedded run just before it): " + ", ".join(
                f"{k} {ratio(x['modes'][k]['latency']['p50_ms'], ref[k], 1)}" for k in MODES) + ".", ""]
    lines += target_verdict(servers, "servers")
    lines += embedded_targets(s)
    lines += ["![scale](benchmarks/scale.png)", ""]
    postgres_scale_section(res, lines)


def graph_store(run: dict) -> str:
    """The graph store of a scale run (runs before the record existed: NetworkX, the default then)."""
    return run.get("stores", {}).get("graph", "networkx")


EMBEDDED_DISK_BEFORE_MIB = 4793
"""Disk of the embedded stores at ×50 when issue 30 set its targets (2026-12-03)."""


def embedded_targets(rows: list[dict]) -> list[str]:
    """Issue 30's targets for the embedded stores, from the ×1 and ×50 rows of
    the current stores: peak RSS at ×50 at most 2 GiB, disk at most half of
    what it was, every mode's p50 at ×50 at most 3× its ×1 value, and index
    time per passage at ×50 within 1.3× of ×1."""
    by = {x["factor"]: x for x in rows if x.get("backend", "embedded") == "embedded" and "failed" not in x}
    one, fifty = by.get(1), by.get(50)
    if not one or not fifty or graph_store(one) != graph_store(fifty):
        return []
    def verdict(value: float, limit: float, unit: str = "", digits: int = 2) -> str:
        return f"{fmt(value, digits)}{unit} (target ≤ {fmt(limit, digits)}{unit}: " + (
            "met)" if value <= limit else f"missed by {ratio(value, limit)}×)")
    per_passage = [x["index_s"] / x["docs"] for x in (one, fifty)]
    growth = [f"{m} {verdict(fifty['modes'][m]['latency']['p50_ms'] / one['modes'][m]['latency']['p50_ms'], 3)}"
              for m in MODES]
    return [
        "Targets for the embedded stores (issue 30), from the ×1 and ×50 rows above: "
        f"peak RSS at ×50 {verdict(fifty['peak_rss_mib'], 2048, ' MiB', 0)}; "
        f"disk at ×50 {verdict(fifty['disk_mib'], EMBEDDED_DISK_BEFORE_MIB / 2, ' MiB', 0)}; "
        f"index time per passage ×50 / ×1 {verdict(per_passage[1] / per_passage[0], 1.3)}; "
        "p50 ×50 / ×1: " + ", ".join(growth) + ".",
        "",
    ]


def labelled_runs(name: str, results: Path = HERE / "results") -> list[tuple[str, dict]]:
    """A benchmark's ``before`` and ``after`` records (``results/<name>_<label>.json``), those present."""
    return [(label, json.loads((results / f"{name}_{label}.json").read_text(encoding="utf-8")))
            for label in ("before", "after") if (results / f"{name}_{label}.json").is_file()]


def run_heading(label: str, res: dict, detail: str = "") -> str:
    """The bold label of a run and what ``_shared.run_record`` kept of it."""
    if "git" not in res:  # a record from before run_record
        return f"**{label}**"
    end = res.get("load_average_at_end")
    return (f"**{label}** ({res['git']}, started {res['started_at']}, load average "
            f"{', '.join(map(str, res['load_average_at_start']))} at start"
            + (f", {', '.join(map(str, end))} at end" if end else "") + f"{detail}): `{res['command']}`")


def store_calls_section(lines: list[str], results: Path = HERE / "results") -> None:
    """``store_calls.py``'s runs (``store_calls_before.json``, ``store_calls_after.json``)."""
    runs = labelled_runs("store_calls", results)
    if not runs:
        return
    lines += [
        "## 4b. Store calls per query: server combination against the embedded stores",
        "",
        "`benchmarks/store_calls.py`: the scale part's corpus (×N), every mode asked once to warm up and once "
        "measured per question, at two `top_k`. Per query (means): round trips to each server (Redis from "
        "`INFO commandstats`; Chroma: the client's requests; Bolt: the adapter's statements), the client's wall "
        "time inside each store's calls (KV + doc status on Redis, vectors on Chroma, graph on Bolt), and the "
        "server's own time where it tells: Redis's `commandstats` microseconds; the Bolt stand-in's execution "
        "time of every read statement, run again through `GRAPH.RO_QUERY` (its Bolt summary carries no timing); "
        "Chroma exposes none (–). Ratio: servers p50 / embedded p50, same run.",
        "",
    ]
    for label, res in runs:
        by = {(r["backend"], r["factor"]): r for r in res["runs"]}
        lines += [run_heading(label, res, f"; {res['runs'][0]['questions']} questions"), ""]
        rows = []
        for (backend, factor), srv in sorted(by.items()):
            emb = by.get(("embedded", factor))
            if backend != "servers":
                continue
            for top_k, modes in srv["top_k"].items():
                for mode, x in modes.items():
                    e = (emb or {}).get("top_k", {}).get(top_k, {}).get(mode, {})
                    t, c, sv = x["round_trips"], x["client_ms"], x["server_ms"]
                    rows.append([f"×{factor}", top_k, mode, fmt(e.get("p50_ms"), 1), fmt(x["p50_ms"], 1),
                                 ratio(x["p50_ms"], e.get("p50_ms"), 1),
                                 f"{t['redis']:g} / {t['chroma']:g} / {t['bolt']:g}",
                                 f"{c['kv'] + c['doc_status']:.1f} / {c['vector']:.1f} / {c['graph']:.1f}",
                                 f"{sv['redis']:.2f} / – / " + ("–" if sv["bolt"] is None else f"{sv['bolt']:.1f}")])
        lines += table(["corpus", "top_k", "mode", "embedded p50 (ms)", "servers p50 (ms)", "ratio",
                        "round trips Redis / Chroma / Bolt", "client ms Redis / Chroma / Bolt",
                        "server ms Redis / Chroma / Bolt"], rows)
        lines += [""]


def plots(res: dict, out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    q = res.get("quality")
    if q:
        rk, lr = q["ragkit"]["scores"], q["lightrag"]["scores"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        xs = range(len(MODES))
        for ax, metric, title in ((axes[0], "recall", "supporting-passage recall"),
                                  (axes[1], "recall@5", "recall@5 of the ranked chunks")):
            ax.bar([x - 0.2 for x in xs], [rk[m][metric] for m in MODES], 0.4, label="ragkit")
            ax.bar([x + 0.2 for x in xs], [lr[m][metric] for m in MODES], 0.4, label="LightRAG")
            ax.set_xticks(list(xs), MODES)
            ax.set_ylim(0, 1)
            ax.set_title(title)
        axes[0].legend()
        fig.tight_layout()
        fig.savefig(out_dir / "quality.png", dpi=110)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(6, 3.4))
        ax.bar([x - 0.2 for x in xs], [rk[m]["p50_ms"] for m in MODES], 0.4, label="ragkit p50")
        ax.bar([x + 0.2 for x in xs], [lr[m]["p50_ms"] for m in MODES], 0.4, label="LightRAG p50")
        ax.set_xticks(list(xs), MODES)
        ax.set_ylabel("ms")
        ax.set_title("context building latency (p50)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "latency.png", dpi=110)
        plt.close(fig)
    t = res.get("throughput")
    if t:
        fig, ax = plt.subplots(figsize=(6, 3.4))
        labels = [f"latency {res['settings']['latency_s']} s", "zero latency"]
        vals_rk = [t["latency"]["ragkit"]["wall_s"], t["zero_latency"]["ragkit"]["wall_s"]]
        vals_lr = [t["latency"]["lightrag"]["wall_s"], t["zero_latency"]["lightrag"]["wall_s"]]
        ax.bar([-0.2, 0.8], vals_rk, 0.4, label="ragkit")
        ax.bar([0.2, 1.2], vals_lr, 0.4, label="LightRAG")
        ax.set_xticks([0, 1], labels)
        ax.set_ylabel("wall seconds")
        ax.set_title(f"indexing {t['prefix']} passages")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "throughput.png", dpi=110)
        plt.close(fig)
    done = [x for x in res.get("scale") or [] if "failed" not in x]
    if done:
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
        for backend, style in (("embedded", "-"), ("servers", ":"), ("postgres", "-.")):
            s = [x for x in done if x.get("backend", "embedded") == backend]
            if not s:
                continue
            f = [x["factor"] for x in s]
            axes[0].plot(f, [x["index_s"] for x in s], "o" + style, label=f"{backend}")
            axes[0].plot(f, [s[0]["index_s"] * x / f[0] for x in f], "--", color="grey", linewidth=0.8)
            axes[1].plot(f, [x["peak_rss_mib"] for x in s], "o" + style, label=backend)
            for m in MODES:
                axes[2].plot(f, [x["modes"][m]["latency"]["p50_ms"] for x in s], "o" + style,
                             label=f"{m} ({backend})")
        axes[0].set_title("index wall (s); grey: linear from ×1")
        axes[0].legend(fontsize=7)
        axes[1].set_title("peak RSS (MiB)")
        axes[1].legend(fontsize=7)
        axes[2].set_title("query p50 (ms)")
        axes[2].legend(fontsize=6)
        for ax in axes:
            ax.set_xlabel("corpus multiple")
            ax.set_xscale("log")
            ax.set_yscale("log")
        fig.tight_layout()
        fig.savefig(out_dir / "scale.png", dpi=110)
        plt.close(fig)


def webui_graph_section(lines: list[str], path: Path = HERE / "results" / "webui_graph.json") -> None:
    """The web UI's graph page at 10,000 nodes, from its browser test
    (``tests/webui/test_webui_graph_scale.py``), when that result exists."""
    if not path.exists():
        return
    r = json.loads(path.read_text(encoding="utf-8"))
    m, g, pan = r["machine"], r["graph"], r["pan"]
    lines += [
        "## Web UI: the graph page at 10,000 nodes (ragkit only)",
        "",
        f"From `{path.relative_to(ROOT)}`, written by the browser test (started {r['started_at']}): "
        f"`{r['command']}`. {g['nodes']:,} nodes and {g['edges']:,} edges in view (depth {g['depth']} around a hub; "
        "LightRAG's graph view stops at 1,000 nodes), drawn by sigma.js on WebGL in headless Chromium "
        f"{m['browser']} with {m['webgl_renderer']} (software rendering: no GPU).",
        "",
        f"- Machine: {m['cpus']} CPUs ({m['cpu']}), {m['platform']}; load average at start "
        f"{', '.join(map(str, m['load_average_at_start']))} (shared with other jobs: times are upper bounds).",
        "",
        *table(["measure", "value"], [
            ["time to first render (subgraph call + draw)", f"{fmt(r['first_render_ms'], 0)} ms"],
            ["of which the `/graph/subgraph` call (server and JSON)", f"{fmt(r['fetch_ms'], 0)} ms"],
            ["of which building the graph and the first frame", f"{fmt(r['draw_ms'], 0)} ms"],
            ["panning: frames / seconds", f"{pan['frames']} / {fmt(pan['seconds'], 1)}"],
            ["panning: mean frame time", f"{fmt(pan.get('frame_ms_mean'), 1)} ms"],
            ["panning: frame time p50 / p95 / max", f"{fmt(pan['frame_ms_p50'], 1)} / {fmt(pan['frame_ms_p95'], 1)} / {fmt(pan['frame_ms_max'], 1)} ms"],
        ]),
        "",
    ]


def render(res: dict, source: str | None = None) -> str:
    """The Markdown report; ``source`` is the JSON it was read from, as shown
    (default ``benchmarks/results/<name>.json``)."""
    m = res["machine"]
    source = source or f"benchmarks/results/{res['name']}.json"
    lines = [
        "# Benchmarks: ragkit and LightRAG side by side",
        "",
        f"Generated by `benchmarks/report.py` from `{source}` "
        f"(run started {res['started_at']}, {res['total_s'] / 60:.1f} minutes in all). "
        "Reproduce everything on this page with **`make bench`** (`python benchmarks/bench.py`; "
        "`--quick` for a few-minute run on 10 questions; `make bench-smoke` checks every part on 3 questions, as CI does). Both systems were measured in the same run, one after the other.",
        "",
        f"- Machine: {m['cpus']} CPUs ({m['cpu']}), {m['memory']}, {m['platform']}; load average at start "
        f"{', '.join(map(str, m['load_average_at_start']))} (other jobs share this machine: wall times move, "
        "ratios from one run are what to compare).",
        f"- Versions: Python {m['python']}, ragkit {m['ragkit']}, LightRAG (lightrag-hku) {m['lightrag']}, "
        f"torch {m['torch']}, sentence-transformers {m['sentence_transformers']}.",
        f"- Command: `{res['command']}`.",
        *[f"- Re-run afterwards, replacing its part(s) of this page: {', '.join(x['parts'])}, started "
          f"{x['started_at']} ({x['total_s'] / 60:.1f} minutes, load average at start "
          f"{', '.join(map(str, x.get('load_average_at_start') or []))}): `{x['command']}`."
          for x in res.get("reruns", [])],
        "- Data: MuSiQue subset with gpt-3.5-turbo-1106 extractions (`../shared/data/musique`), replayed into "
        "each system's own extraction format (the data set's canonical rendering).",
        "",
    ]
    targets_section(res, lines)
    quality_section(res, lines)
    equal_cost_section(res, lines)
    throughput_section(res, lines)
    latency_section(res, lines)
    scale_section(res, lines)
    store_calls_section(lines)
    from report_postgres import pg_profile_section  # it imports this module's helpers

    pg_profile_section(lines)
    from report_aliases import aliases_section  # it imports this module's helpers

    aliases_section(res, lines)
    from report_ray import ray_section  # it imports this module's helpers

    ray_section(res, lines)
    webui_graph_section(lines)
    lines += ["## How it was run", ""]
    lines += [f"- {x['step']}: {x['seconds']:.0f} s" for x in res.get("steps", [])]
    lines += [""]
    findings = HERE / "findings.md"
    if findings.exists():
        lines += [findings.read_text(encoding="utf-8").rstrip(), ""]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("result", type=Path)
    p.add_argument("--md", type=Path, default=ROOT / "docs" / "benchmarks.md")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args()
    res = json.loads(args.result.read_text(encoding="utf-8"))
    args.md.parent.mkdir(parents=True, exist_ok=True)
    path = args.result.resolve()
    source = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    args.md.write_text(render(res, source), encoding="utf-8")
    if not args.no_plots:
        plots(res, args.md.parent / "benchmarks")
    print(f"wrote {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
