"""The report's PostgreSQL scale table (``bench.py --only scale-postgres``):
each factor's run with every store on PostgreSQL beside the embedded stores'
run at the same factor, made just before it in the same harness run."""

from __future__ import annotations

from pathlib import Path

from report import MODES, fmt, labelled_runs, ratio, run_heading, table, warm_up_note

RESULTS = Path(__file__).resolve().parent / "results"

TARGET = 2.0
"""Every mode's p50 on PostgreSQL within 2x of the embedded stores' (at x1 and x5)."""


def postgres_scale_section(res: dict, lines: list[str]) -> None:
    rows = [x for x in res.get("scale") or [] if x.get("backend") == "postgres"]
    if not rows:
        return
    lines += [
        "### 4a. Scale on PostgreSQL",
        "",
        "Every store on one PostgreSQL 18 with pgvector 0.8 (`postgres` KV, doc status, vectors with an HNSW "
        "index, graph tables), a fresh cluster per factor on loopback, started by the harness "
        "(`plugins/ragkit-postgres/scripts/postgres-server`, default settings, fsync on). Each factor first runs "
        "on the embedded stores (the reference, same corpus and questions, minutes apart on the same machine), "
        "then on PostgreSQL. ragkit's peak RSS is its own process; the database's memory is the peak of the "
        "postgres processes' summed PSS (shared buffers counted once; RSS sum in the JSON), sampled every 0.2 s; "
        "its size is `pg_database_size` after the run. Query p50 in ms, and the ratio PostgreSQL / embedded "
        f"(target: at most {TARGET:g} at ×1 and ×5). " + warm_up_note(rows),
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
    lines += [""] + vacuum_note(rows) + target_verdict(rows, "PostgreSQL") + notes + ([""] if notes else [])


def vacuum_note(rows: list[dict]) -> list[str]:
    """The ``VACUUM (ANALYZE)`` the scale run makes between the load and the
    queries (``bench_ragkit.vacuum_postgres``), and how long it took."""
    done = [x for x in rows if x.get("vacuum_s") is not None]
    if not done:
        return []
    took = ", ".join(f"{fmt(x['vacuum_s'], 1)} s at ×{x['factor']}" for x in done)
    return [f"Between the load and the queries the run makes the `VACUUM (ANALYZE)` an operator would after a "
            f"bulk load (left to autovacuum, it ran for minutes beside the timed queries on this 2-core machine): "
            f"{took}; not in the index time.", ""]


def target_verdict(rows: list[dict], backend: str) -> list[str]:
    """Whether every mode's p50 is within ``TARGET`` of the embedded run made
    beside it, at x1 and x5 (issue 28), for the rows that have that run."""
    checked = [x for x in rows if "failed" not in x and x["factor"] in (1, 5) and x.get("reference")]
    if not checked:
        return []
    missed = [f"{m} at ×{x['factor']} ({ratio(x['modes'][m]['latency']['p50_ms'], x['reference']['p50_ms'][m])})"
              for x in checked for m in MODES
              if x["modes"][m]["latency"]["p50_ms"] > TARGET * x["reference"]["p50_ms"][m]]
    verdict = "met for every mode" if not missed else "missed for " + ", ".join(missed)
    return [f"Target on {backend} (p50 within {TARGET:g}× of the embedded stores) at "
            f"×{', ×'.join(str(x['factor']) for x in checked)}: {verdict}.", ""]


def pg_profile_section(lines: list[str], results: Path = RESULTS) -> None:
    """``pg_profile.py``'s runs (``pg_profile_before.json``, ``pg_profile_after.json``):
    statements and the server's own time per store per query, from its log."""
    runs = labelled_runs("pg_profile", results)
    if not runs:
        return
    stores = ("kv", "doc_status", "vector", "graph", "other")
    lines += [
        "## 4c. Statements per query on PostgreSQL",
        "",
        "`benchmarks/pg_profile.py`: every store on one PostgreSQL (a fresh server started by the script), the "
        "scale part's corpus, every question asked once to warm up (statements prepared) and once measured, per "
        "mode and `top_k`, with `log_min_duration_statement = 0`. Per query (medians over the questions; the "
        "maximum in brackets where it differs): statements, i.e. round trips, per store (`BEGIN`/`COMMIT` "
        "counted with the statement they wrap; `other`: statements of no store, such as a pool's connection "
        "reset), and the server's own time on them from its log, in ms.",
        "",
    ]
    for label, run in runs:
        modes = run.get("modes", run)  # older files hold the modes alone
        lines += [run_heading(label, run), ""]
        rows = []
        for key, per_store in modes.items():
            mode, top_k = key.split("@")

            def trips(st: str) -> str:
                v = per_store.get(st)
                if not v:
                    return "0"
                extra = f" ({v['round_trips_max']})" if v["round_trips_max"] != v["round_trips"] else ""
                return f"{v['round_trips']:g}{extra}"

            rows.append([top_k, mode, " / ".join(trips(st) for st in stores),
                         " / ".join(fmt(per_store.get(st, {}).get("server_ms", 0.0), 2) for st in stores)])
        lines += table(["top_k", "mode", "round trips KV / doc status / vector / graph / other",
                        "server ms KV / doc status / vector / graph / other"], rows)
        lines += [""]
