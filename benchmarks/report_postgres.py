"""The report's PostgreSQL scale table (``bench.py --only scale-postgres``):
each factor's run with every store on PostgreSQL beside the embedded stores'
run at the same factor, made just before it in the same harness run."""

from __future__ import annotations

from report import MODES, fmt, ratio, table

TARGET = 2.0
"""Every mode's p50 on PostgreSQL within 2x of the embedded stores' (at x1 and x5)."""


def postgres_scale_section(res: dict, lines: list[str]) -> None:
    rows = [x for x in res.get("scale") or [] if x.get("backend") == "postgres"]
    if not rows:
        return
    lines += [
        "### 4b. Scale on PostgreSQL",
        "",
        "Every store on one PostgreSQL 18 with pgvector 0.8 (`postgres` KV, doc status, vectors with an HNSW "
        "index, graph tables), a fresh cluster per factor on loopback, started by the harness "
        "(`plugins/ragkit-postgres/scripts/postgres-server`, default settings, fsync on). Each factor first runs "
        "on the embedded stores (the reference, same corpus and questions, minutes apart on the same machine), "
        "then on PostgreSQL. ragkit's peak RSS is its own process; the database's memory is the peak of the "
        "postgres processes' summed PSS (shared buffers counted once; RSS sum in the JSON), sampled every 0.2 s; "
        "its size is `pg_database_size` after the run. Query p50 in ms, and the ratio PostgreSQL / embedded "
        f"(target: at most {TARGET:g} at ×1 and ×5).",
        "",
    ]
    out, notes = [], []
    for x in rows:
        if "failed" in x:
            out.append([f"×{x['factor']}", "not finished (below)"] + ["-"] * (6 + len(MODES)))
            notes.append(f"postgres ×{x['factor']}: {x['failed']}.")
            continue
        ref = x.get("reference", {})
        p50 = {m: x["modes"][m]["latency"]["p50_ms"] for m in MODES}
        out.append([f"×{x['factor']}", fmt(x["docs"]), f"{fmt(x['index_s'], 1)} ({fmt(ref.get('index_s'), 1)})",
                    f"{fmt(x['peak_rss_mib'], 0)} ({fmt(ref.get('peak_rss_mib'), 0)})",
                    fmt(x.get("db_peak_pss_mib"), 0), fmt(x.get("db_size_mib"), 0), fmt(ref.get("disk_mib"), 0)]
                   + [f"{fmt(p50[m], 1)} / {fmt(ref.get('p50_ms', {}).get(m), 1)} = "
                      f"{ratio(p50[m], ref.get('p50_ms', {}).get(m))}" for m in MODES])
    lines += table(["corpus", "passages", "index s (embedded)", "ragkit peak RSS MiB (embedded)",
                    "database peak PSS MiB", "database size MiB", "embedded disk MiB"]
                   + [f"{m} p50 pg / emb = ratio" for m in MODES], out)
    met = [(x["factor"], m) for x in rows if "failed" not in x and x["factor"] in (1, 5) and x.get("reference")
           for m in MODES if x["modes"][m]["latency"]["p50_ms"] > TARGET * x["reference"]["p50_ms"][m]]
    checked = [x["factor"] for x in rows if "failed" not in x and x["factor"] in (1, 5) and x.get("reference")]
    if checked:
        verdict = "met for every mode" if not met else "missed for " + ", ".join(f"{m} at ×{f}" for f, m in met)
        lines += ["", f"Target (p50 within {TARGET:g}× of embedded) at ×{', ×'.join(map(str, checked))}: {verdict}."]
    lines += [""] + notes + ([""] if notes else [])
