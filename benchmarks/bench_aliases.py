"""Entity resolution's part of the benchmark (issue 31, item 2), in ragkit's venv.

Two measurements, written as one JSON file:

- **rules**: the name rules (``ragkit.core.aliases``) on the labelled alias
  sets (``tests/fixtures/aliases``: MuSiQue titles and their variants, and a
  Chinese and Japanese set), per half (even lines A, odd lines B) and in all:
  precision and recall of the pairs the rules link (``SAME``), the pairs they
  leave to the model check (``MAYBE``), and the recall a perfect check would
  reach. Pairs whose keys are equal ("TEN" and "Ten") are one entity before
  resolution starts: counted apart, not scored.
- **cost**: the MuSiQue corpus indexed three times with the replayed
  extractions behind the simulated latency (``_shared.SimulatedLatency``):
  resolution off, on (rules only), and on with the model check (nothing was
  recorded for it: the replay answers "none", so the calls are made and
  counted, and link nothing). LLM calls per role, wall time, links.

Run by ``bench.py --only aliases``; alone::

    .venv/bin/python benchmarks/bench_aliases.py --inputs DIR --out aliases.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import SimulatedLatency, read_json, write_json  # noqa: E402
from bench_ragkit import BenchHashEmbedder, BenchLLM  # noqa: E402

SETS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "aliases"
RUNS = {"off": {"aliases": False}, "rules": {"aliases": True}, "rules+check": {"aliases": True, "alias_check": True}}


def rule_scores(rows: list[dict]) -> dict[str, Any]:
    from ragkit.core.aliases import MAYBE, SAME, match, read
    from ragkit.ids import normalize_name

    equal = [r for r in rows if normalize_name(r["a"]) == normalize_name(r["b"])]
    rows = [r for r in rows if r not in equal]
    verdicts = [match(read(normalize_name(r["a"])), read(normalize_name(r["b"]))) for r in rows]
    same = [r for r, v in zip(rows, verdicts) if v and v[0] == SAME]
    maybe = [r for r, v in zip(rows, verdicts) if v and v[0] == MAYBE]
    positives = sum(r["same"] for r in rows)
    right = sum(r["same"] for r in same)
    return {
        "pairs": len(rows), "positives": positives, "equal_keys": len(equal),
        "equal_keys_same": sum(r["same"] for r in equal),
        "linked": len(same), "linked_right": right,
        "precision": round(right / len(same), 3) if same else None,
        "recall": round(right / positives, 3) if positives else None,
        "maybe": len(maybe), "maybe_same": sum(r["same"] for r in maybe),
        "recall_with_perfect_check": round((right + sum(r["same"] for r in maybe)) / positives, 3) if positives else None,
    }


def rules_part() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(SETS.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        out[path.stem] = {"A": rule_scores(rows[0::2]), "B": rule_scores(rows[1::2]), "all": rule_scores(rows)}
    return out


async def index_run(passages: list[str], index: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from ragkit.core.alias_index import AliasIndex
    from ragkit.rag import RAG
    from ragkit.schema import Document
    from ragkit.sections.index import IndexConfig
    from ragkit.settings import Settings
    from ragkit.testing.replay import ReplayLLM

    latency = SimulatedLatency(args.latency, args.jitter if args.latency else 0.0, args.seed)
    llm = BenchLLM(ReplayLLM(), latency)
    config = IndexConfig.model_validate({"llm_concurrency": args.concurrency, **index})
    with tempfile.TemporaryDirectory(prefix="ragkit-aliases-") as tmp:
        async with RAG(Settings(working_dir=Path(tmp)), llm=llm, embedder=BenchHashEmbedder(args.dimension),
                       index=config) as rag:
            t0 = time.perf_counter()
            report = await rag.indexer().insert([Document.from_text(t) for t in passages])
            wall = time.perf_counter() - t0
            links = await AliasIndex(rag.stores.aliases, rag.stores.alias_splits).all()
            entities = await rag.stores.graph.node_count()
    calls = dict(report.llm["calls"])
    return {"wall_s": round(wall, 2), "llm_calls": calls, "llm_calls_total": sum(calls.values()),
            "entities": entities, "links": len(links), "processed": len(report.processed)}


async def cost_part(args: argparse.Namespace) -> dict[str, Any]:
    replay = read_json(Path(args.inputs) / "replay.json")
    passages = [p["text"] for p in replay["passages"]][: args.docs or None]
    runs = {name: await index_run(passages, index, args) for name, index in RUNS.items()}
    off = runs["off"]
    for run in runs.values():
        run["calls_ratio"] = round(run["llm_calls_total"] / off["llm_calls_total"], 3)
        run["wall_ratio"] = round(run["wall_s"] / off["wall_s"], 3)
    return {"docs": len(passages), "latency_s": args.latency, "concurrency": args.concurrency, "runs": runs}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", required=True, help="bench_ragkit.py prepare's folder (replay.json)")
    p.add_argument("--out", required=True)
    p.add_argument("--docs", type=int, default=0, help="first N passages (0: all)")
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--jitter", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--dimension", type=int, default=384)
    args = p.parse_args()
    write_json(Path(args.out), {"rules": rules_part(), "cost": asyncio.run(cost_part(args))})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
