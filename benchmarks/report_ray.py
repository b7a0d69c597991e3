"""The Ray executor section of the benchmark report (``bench_ray.py``'s result,
``res["ray"]``), apart from ``report.py`` to keep each file readable."""

from __future__ import annotations

from report import fmt, table


def ray_section(res: dict, lines: list[str]) -> None:
    r = res.get("ray")
    if not r:
        return
    lines += [
        "## Ingestion on a Ray cluster (ragkit only)",
        "",
        f"The first {r['docs']:,} MuSiQue passages, one file each, indexed by `ragkit index` into fresh embedded "
        "stores: in-process (`--executor local`), then `--executor ray` on a real local cluster (`ray start`, one "
        "CPU per node) of 1 and of 2 nodes. The same LLM in every run: the replayed extractions behind the "
        f"simulated latency ({r['latency_s']} s + up to {r['jitter_s']} s a call), built where it answers (the "
        f"model actors, for Ray), `llm_concurrency` {r['concurrency']}, the hash embedder. *wall*: the command, "
        "interpreter start and cluster connection included; *index s*: the indexer's own time; *efficiency*: "
        "LLM calls × their mean latency / concurrency over *index s* (1.0 is the bound the latency sets); "
        "*same stores*: every store equals the in-process run's (graph, vectors, statuses, the LLM cache's "
        f"extraction entries). This machine has {r['cpus']} cores, which the nodes share with the driver: the "
        "runs show the executor's overhead and that it changes nothing, not a cluster's speed-up.",
        "",
    ]
    rows = []
    for name, x in r["runs"].items():
        same = "-" if name == "in-process" else ("yes" if x.get("same_stores") else
                                                 "no: " + ", ".join(x.get("store_differences", [])))
        rows.append([name, fmt(x["wall_s"], 2), fmt(x["wall_ratio"], 2), fmt(x["index_s"], 2),
                     f"{x['llm_calls_total']:,}", fmt(x["efficiency"], 3), str(x["answering_processes"]),
                     fmt(x["driver_peak_rss_mib"], 1), same])
    lines += table(["run", "wall s", "wall ×in-process", "index s", "LLM calls", "efficiency",
                    "processes that answered", "driver peak RSS MiB", "same stores"], rows)
    lines += [""]
