"""ragkit's side of the benchmark, and the inputs both sides share; runs in ragkit's venv.

    python benchmarks/bench_ragkit.py prepare    --inputs DIR [--questions PATH]
    python benchmarks/bench_ragkit.py quality    --inputs DIR --out FILE [...]
    python benchmarks/bench_ragkit.py throughput --inputs DIR --out FILE [...]
    python benchmarks/bench_ragkit.py scale      --inputs DIR --out FILE --factor N [...]
    python benchmarks/bench_ragkit.py score      --inputs DIR --run FILE --out FILE

``bench.py`` calls these, each in its own process (so peak memory is the run's
own). ``prepare`` writes what LightRAG's worker reads, so the two systems get
exactly the same knowledge and keywords:

- ``replay.json``: every passage (title, newline, text) with its recorded
  extraction in the data set's canonical rendering
  (``ragkit.testing.replay.canonical_extraction``);
- ``questions.json``: every question with its keywords by the data set's rule
  (``ragkit.testing.musique_keywords``: low-level = corpus entity names found in
  the question, longest first; high-level = its content words; when no entity
  name is found, the low-level list is the high-level one, for both systems)
  and its gold supporting passages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import (  # noqa: E402
    SimulatedLatency,
    hash_embed,
    index_dir,
    latencies,
    peak_rss_mib,
    read_json,
    squash,
    write_json,
)

MODES = ["naive", "local", "global", "hybrid", "mix"]
RAGKIT_ONLY_MODES = ["ppr"]
"""Modes LightRAG does not have: measured for ragkit alone in the quality run."""
EQUAL_TOKENS_CHUNK_TOP_K = 60
"""``chunk_top_k`` of the ``ppr@lightrag-mix-tokens`` run: high enough that
LightRAG mix's token count, not the chunk count, bounds the context."""
SPLIT = ("A", "B")
"""The questions' split, by position in the questions file: even positions are
half A (every ranking choice was made on it), odd ones half B (confirmation
only). The score reports recall and recall@5 on each half."""


# -- shared inputs ----------------------------------------------------------------


def prepare(args: argparse.Namespace) -> None:
    from ragkit.testing.musique_keywords import question_keywords
    from ragkit.testing.recall import gold_passages, passage_text
    from ragkit.testing.replay import ReplayLLM, canonical_extraction, load_musique

    corpus, openie, dev = load_musique()
    by_passage = {d["passage"]: d for d in openie}
    passages = []
    for p in corpus:
        text = passage_text(p["title"], p["text"])
        entities, relations = canonical_extraction(by_passage[text])
        passages.append({
            "text": text,
            "entities": [[e.name, e.type, e.description] for e in entities],
            "relations": [[r.source, r.target, r.keywords, r.description] for r in relations],
        })
    questions = json.loads(Path(args.questions).read_text(encoding="utf-8")) if args.questions else dev
    names = ReplayLLM().recording.entity_names()
    rows = []
    for q in questions:
        high, low = question_keywords(q["question"], names)
        rows.append({"id": q["id"], "question": q["question"], "high": high, "low": low or high,
                     "entity_names_found": len(low), "gold": sorted(gold_passages(q))})
    write_json(Path(args.inputs) / "replay.json", {"passages": passages})
    write_json(Path(args.inputs) / "questions.json", rows)
    print(f"prepared {len(passages)} passages, {len(rows)} questions in {args.inputs}")


# -- models -----------------------------------------------------------------------


class BenchLLM:
    """ragkit's replay model behind the simulated latency both systems share."""

    def __init__(self, inner: Any, latency: SimulatedLatency) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.capabilities = inner.capabilities
        self.latency = latency

    async def complete(self, request: Any) -> Any:
        from ragkit.protocols.models import Completion, Usage

        texts = [request.system or "", *(m.content for m in request.history), request.prompt]
        from ragkit.core.prompts import is_gleaning_request

        role = "gleaning" if is_gleaning_request(request) else request.role
        text = await self.latency(texts, lambda: self.inner.answer(request), role)
        return Completion(text=text, usage=Usage(input_tokens=0, output_tokens=0))

    async def stream(self, request: Any) -> AsyncIterator[str]:
        yield (await self.complete(request)).text


class ScaledReplay:
    """The replay for the synthetic expansion (``--factor N``): copy ``k`` of a
    passage is its text under the title line ``"{title} [copy k]"``; its
    extraction is the passage's canonical one with every entity name suffixed
    ``" [k]"`` (in names, relation endpoints and descriptions), so each copy adds
    its own nodes and edges and the graph grows N-fold with the same shape.
    Copy 0 is the original passage, so the dev questions still find their
    entities (now among N times as many)."""

    def __init__(self) -> None:
        from ragkit.testing.replay import ReplayLLM

        self.replay = ReplayLLM()
        self.model_id = self.replay.model_id + ":scaled"
        self.capabilities = self.replay.capabilities

    def answer(self, request: Any) -> str:
        import re

        from ragkit.core.prompts import chunk_text_of, render_rows
        from ragkit.schema import Entity, Relation
        from ragkit.testing.replay import canonical_extraction

        chunk = chunk_text_of(request.prompt)
        if chunk is not None:
            title, _, rest = chunk.partition("\n")
            m = re.fullmatch(r"(.*) \[copy (\d+)\]", title)
            if m:
                found = self.replay.recording.find(m.group(1) + "\n" + rest)
                if found is not None:
                    k = m.group(2)
                    ents, rels = canonical_extraction(found[0])
                    names = sorted({e.name for e in ents}, key=len, reverse=True)
                    pattern = re.compile("|".join(map(re.escape, names))) if names else None

                    def sfx(text: str) -> str:  # each name once, longest first, no overlaps
                        return pattern.sub(lambda m: f"{m.group(0)} [{k}]", text) if pattern else text

                    ents = [Entity(name=f"{e.name} [{k}]", type=e.type, description=sfx(e.description)) for e in ents]
                    rels = [Relation(source=f"{r.source} [{k}]", target=f"{r.target} [{k}]", keywords=r.keywords,
                                     description=sfx(r.description), strength=r.strength) for r in rels]
                    return render_rows(ents, rels)
        return self.replay.answer(request)


def scaled_passages(passages: list[str], factor: int) -> list[str]:
    out = list(passages)
    for k in range(1, factor):
        for text in passages:
            title, _, rest = text.partition("\n")
            out.append(f"{title} [copy {k}]\n{rest}")
    return out


class BenchHashEmbedder:
    """``_shared.hash_embed``: the same cheap deterministic embedder LightRAG gets."""

    def __init__(self, dimension: int) -> None:
        from ragkit.protocols.base import Capability

        self.dimension = dimension
        self.max_batch_size = 64
        self.model_id = f"hash-{dimension}"
        self.capabilities = frozenset({Capability.DETERMINISTIC})

    async def embed(self, texts):
        return hash_embed(list(texts), self.dimension)


class CountingEmbedder:
    """Counts the texts an embedder is given; everything else is the inner one's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts = 0
        self.calls = 0
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def embed(self, texts):
        self.texts += len(texts)
        self.calls += 1
        started = time.perf_counter()
        try:
            return await self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started


def make_rag(working_dir: Path, llm: Any, embedder: Any, args: argparse.Namespace, **settings: Any):
    from ragkit.rag import RAG
    from ragkit.sections.index import IndexConfig
    from ragkit.settings import Settings

    index = IndexConfig.model_validate({"llm_concurrency": args.concurrency, "extract": {"gleaning": args.gleaning}})
    if embedder == "hash":
        embedder = BenchHashEmbedder(args.dimension)
    return RAG(Settings(working_dir=working_dir, **settings), llm=llm, embedder=embedder, index=index)


def minilm_embedder(backend: str = "onnx") -> Any:
    """ragkit's own sentence-transformers plugin on the packaged MiniLM, run by
    ONNX Runtime (``backend = "onnx"``) or by torch as LightRAG's worker runs it."""
    from ragkit_sentence_transformers.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder({"backend": backend})


def query_param(mode: str, q: dict, args: argparse.Namespace, **override: Any):
    from ragkit.schema import QueryParam

    budgets = {"top_k": args.top_k, "chunk_top_k": args.chunk_top_k, "max_entity_tokens": args.max_entity_tokens,
               "max_relation_tokens": args.max_relation_tokens, "max_total_tokens": args.max_total_tokens}
    return QueryParam(
        mode=mode, only_need_context=True, enable_rerank=False,
        high_level_keywords=q["high"], low_level_keywords=q["low"],
        chunk_ranking=getattr(args, "chunk_ranking", "support"), lexical={"on": True, "off": False}.get(getattr(args, "lexical", "auto")),
        **{**budgets, **override},
    )


async def query_all(rag: Any, questions: list[dict], args: argparse.Namespace, modes: list[str],
                    embedder: CountingEmbedder, **override: Any) -> dict:
    out: dict[str, Any] = {}
    for mode in modes:
        rows = []
        for q in questions:
            e0, t0 = embedder.seconds, time.perf_counter()
            result = await rag.aquery(q["question"], query_param(mode, q, args, **override))
            seconds = time.perf_counter() - t0
            rows.append({"id": q["id"], "chunks": [c["content"] for c in result.chunks], "seconds": seconds,
                         "embed_seconds": embedder.seconds - e0,
                         # counted as LightRAG's worker counts its context: the whole text, same encoding
                         "context_tokens": rag.tokenizer.count(result.context),
                         "prompt_tokens": result.metadata.get("tokens", {}).get("prompt_total", 0),
                         # budget-bound: rows were left out for the token budget (not for lack of material)
                         "budget_bound": _budget_bound(result.metadata),
                         "stages": result.metadata.get("timings", {})})
        out[mode] = {"questions": rows, **latencies(rows),
                     **({"max_total_tokens": override["max_total_tokens"]} if "max_total_tokens" in override else {})}
    return out


def _budget_bound(meta: dict) -> bool:
    """Found material was left out for the token budget: candidate chunks
    (within chunk_top_k) not shown, or supported entities or relations cut."""
    cut = meta.get("truncated", {})
    return bool(cut.get("entities") or cut.get("relations") or meta.get("chunks_left_out"))


async def budget_runs(rag: Any, questions: list[dict], args: argparse.Namespace, embedder: CountingEmbedder
                      ) -> dict[str, Any]:
    """Every mode at each ``--sweep`` total budget (``MODE@TOKENS``), and at
    ``--equal-tokens`` (``MODE@lightrag``: LightRAG's measured mean context for
    that mode as the total budget)."""
    modes = args.modes.split(",")
    out: dict[str, Any] = {}
    for total in [int(x) for x in args.sweep.split(",") if x]:
        more = await query_all(rag, questions, args, modes, embedder, max_total_tokens=total)
        out.update({f"{m}@{total}": v for m, v in more.items()})
    for mode, total in (json.loads(args.equal_tokens) if args.equal_tokens else {}).items():
        if mode in modes:
            more = await query_all(rag, questions, args, [mode], embedder, max_total_tokens=int(total))
            out[f"{mode}@lightrag"] = more[mode]
    if out and "ppr" in modes:  # ppr at LightRAG mix's context: the best mode at mix's cost
        mix = (json.loads(args.equal_tokens) if args.equal_tokens else {}).get("mix")
        if mix:
            more = await query_all(rag, questions, args, ["ppr"], embedder, max_total_tokens=int(mix))
            out["ppr@lightrag-mix"] = more["ppr"]
            # The same token budget with the chunk bound lifted: the tokens bind, not
            # the count of chunks, so ragkit spends mix's context on evidence
            # rather than on graph rows (equal cost as issue 17 counts it: tokens).
            more = await query_all(rag, questions, args, ["ppr"], embedder, max_total_tokens=int(mix),
                                   chunk_top_k=EQUAL_TOKENS_CHUNK_TOP_K)
            out["ppr@lightrag-mix-tokens"] = more["ppr"]
    return out


# -- runs -------------------------------------------------------------------------


async def run_quality(args: argparse.Namespace) -> dict[str, Any]:
    from ragkit.schema import Document
    from ragkit.testing.replay import ReplayLLM

    replay = read_json(Path(args.inputs) / "replay.json")
    questions = read_json(Path(args.inputs) / "questions.json")
    passages = [p["text"] for p in replay["passages"]][: args.docs or None]
    llm = BenchLLM(ReplayLLM(), SimulatedLatency(0.0, 0.0, 0))
    minilm = args.embedder == "minilm"
    embedder = CountingEmbedder(minilm_embedder(args.st_backend) if minilm else BenchHashEmbedder(args.dimension))
    with index_dir(args.workdir, len(passages)) as (folder, indexed):
        rag = make_rag(folder, llm, embedder, args)
        async with rag:
            t0 = time.perf_counter()
            docs = [] if indexed else [Document.from_text(t) for t in passages]
            report = await rag.indexer().insert(docs)
            index_s = None if indexed else time.perf_counter() - t0
            embedded = {"texts": embedder.texts, "calls": embedder.calls}
            # The whole corpus's indexing cost, set against LightRAG's quality index (issue 17).
            index_tokens = None if indexed else llm.latency.count_tokens()
            modes = await query_all(rag, questions, args, args.modes.split(","), embedder)
            modes.update(await budget_runs(rag, questions, args, embedder))
            if args.variants:  # the graph modes again on the same index, graph chunks by similarity
                args.chunk_ranking = "similarity"
                graph_modes = [m for m in args.modes.split(",") if m in MODES and m != "naive"]
                more = await query_all(rag, questions, args, graph_modes, embedder)
                modes.update({f"{m}/similarity": v for m, v in more.items()})
                args.chunk_ranking = "support"
        if args.variants and minilm and args.st_backend != "torch":
            # Every mode again with MiniLM on torch, the runtime LightRAG's worker uses:
            # how much of the latency gap is the embedding runtime.
            torch_embedder = CountingEmbedder(minilm_embedder("torch"))
            await torch_embedder.inner.embed(["warm-up: the model loads outside the timed queries"])
            async with make_rag(folder, llm, torch_embedder, args) as rag:
                more = await query_all(rag, questions, args, args.modes.split(","), torch_embedder)
            modes.update({f"{m}/torch": v for m, v in more.items()})
    return {
        "system": "ragkit", "version": _version(), "documents": len(passages),
        "indexed": len(report.processed), "index_s": index_s and round(index_s, 2),
        "llm_calls": dict(report.llm["calls"]), "index_tokens": index_tokens,
        "unknown_prompts": llm.inner.unknown_prompts, "embedded_while_indexing": embedded, "embedder": args.embedder,
        "embedder_backend": args.st_backend if minilm else None, "peak_rss_mib": peak_rss_mib(),
        "modes": modes,
    }


async def run_throughput(args: argparse.Namespace) -> dict[str, Any]:
    from ragkit.schema import Document
    from ragkit.testing.replay import ReplayLLM

    replay = read_json(Path(args.inputs) / "replay.json")
    passages = [p["text"] for p in replay["passages"]][: args.docs or None]
    docs = [Document.from_text(t) for t in passages]
    latency = SimulatedLatency(args.latency, args.jitter if args.latency else 0.0, args.seed)
    llm = BenchLLM(ReplayLLM(), latency)
    rss_before = peak_rss_mib()
    with tempfile.TemporaryDirectory(prefix="ragkit-bench-") as tmp:
        t0, cpu0 = time.perf_counter(), time.process_time()
        rag = make_rag(Path(tmp), llm, "hash", args)
        async with rag:
            report = await rag.indexer().insert(docs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "system": "ragkit", "version": _version(), "docs": len(docs), "chunks": report.chunks,
        "processed": len(report.processed), "latency_s": args.latency,
        "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "llm_calls": dict(report.llm["calls"]),
        "unknown_prompts": llm.inner.unknown_prompts,
        **latency.summary(args.concurrency, wall), **latency.count_tokens(),
        "peak_rss_mib": peak_rss_mib(), "rss_before_index_mib": rss_before,
        "chunks_per_s": round(report.chunks / wall, 2),
        "chunks_per_cpu_s": round(report.chunks / cpu, 2) if cpu else None,
        "embedder": f"hash-{args.dimension}",
    }


async def run_scale(args: argparse.Namespace) -> dict[str, Any]:
    from ragkit.schema import Document

    replay = read_json(Path(args.inputs) / "replay.json")
    questions = read_json(Path(args.inputs) / "questions.json")
    passages = scaled_passages([p["text"] for p in replay["passages"]][: args.docs or None], args.factor)
    llm = BenchLLM(ScaledReplay(), SimulatedLatency(0.0, 0.0, 0))
    rss_before = peak_rss_mib()
    settings = json.loads(args.backend_settings) if args.backend_settings else {}
    if args.workspace:
        settings["workspace"] = args.workspace
    with tempfile.TemporaryDirectory(prefix="ragkit-scale-") as tmp:
        embedder = CountingEmbedder(BenchHashEmbedder(args.dimension))
        rag = make_rag(Path(tmp), llm, embedder, args, **settings)
        async with rag:
            t0, cpu0 = time.perf_counter(), time.process_time()
            report = await rag.indexer().insert([Document.from_text(t) for t in passages])
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            rss_indexed = peak_rss_mib()
            vacuum_s = await vacuum_postgres(settings) if args.backend == "postgres" else None
            for _ in range(args.warm_up):  # untimed: what a server settles or fills after a bulk load
                await query_all(rag, questions, args, MODES, embedder)
            modes = await query_all(rag, questions, args, MODES, embedder)
            stores = {kind: type(getattr(rag.stores, field)).name
                      for kind, field in (("kv", "chunks"), ("vector", "chunk_vectors"), ("graph", "graph"),
                                          ("doc_status", "doc_status"))}
        disk = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
    for mode in modes.values():  # keep the report small: latency only
        mode.pop("questions")
    return {
        "system": "ragkit", "factor": args.factor, "docs": len(passages), "processed": len(report.processed),
        "chunks": report.chunks, "backend": args.backend, "index_s": round(wall, 2), "index_cpu_s": round(cpu, 2),
        "chunks_per_s": round(report.chunks / wall, 1), "llm_calls": dict(report.llm["calls"]),
        "peak_rss_mib": peak_rss_mib(), "peak_rss_after_index_mib": rss_indexed,
        "rss_before_index_mib": rss_before, "disk_mib": round(disk / 2**20, 1), "warm_up_rounds": args.warm_up,
        "stores": stores,
        **({"vacuum_s": vacuum_s} if vacuum_s is not None else {}), "modes": modes,
    }


async def vacuum_postgres(settings: dict[str, Any]) -> float:
    """``VACUUM (ANALYZE)`` of the database after the bulk load, as its operator
    would run it; its seconds. Why: autovacuum starts on the tables the load
    wrote (the vectors' HNSW index first, for the rows upserts replaced) and
    ran for minutes beside the timed queries, on a machine of two cores,
    doubling their p50 (naive 9.9 ms against 4.9 settled, ×1). A manual
    VACUUM takes the work over from it (autovacuum yields to it)."""
    import asyncpg

    conn = await asyncpg.connect(settings["vector"]["options"]["dsn"])
    try:
        started = time.perf_counter()
        await conn.execute("VACUUM (ANALYZE)")
        return round(time.perf_counter() - started, 2)
    finally:
        await conn.close()


def score(args: argparse.Namespace) -> None:
    """Scores a run's ranked chunk lists against the gold passages, whitespace
    collapsed on both sides (``ragkit.testing.recall.score``)."""
    import statistics

    from ragkit.testing.recall import score as score_one
    from ragkit.testing.recall import summarise

    listed = read_json(Path(args.inputs) / "questions.json")
    questions = {q["id"]: q for q in listed}
    half = {q["id"]: SPLIT[i % 2] for i, q in enumerate(listed)}
    run = read_json(args.run)
    table = {}
    for mode, data in run["modes"].items():
        rows = []
        for r in data["questions"]:
            ranked, gold = [squash(c) for c in r["chunks"]], {squash(g) for g in questions[r["id"]]["gold"]}
            # recall@N at LightRAG's chunk count (chunk_top_k): the same number of chunks for both
            rows.append({**score_one(ranked, gold), f"recall@{args.chunk_top_k}":
                         len(gold & set(ranked[: args.chunk_top_k])) / len(gold)})
        halves = {}
        for name in SPLIT:  # the split every ranking choice was made on (choose on A, confirm on B)
            mine = [row for row, r in zip(rows, data["questions"]) if half[r["id"]] == name]
            if mine:
                halves.update({f"recall_{name}": summarise(mine)["recall"], f"recall@5_{name}": summarise(mine)["recall@5"]})
        fill = {}
        if data.get("max_total_tokens"):  # a budget run: how much of the budget the context uses
            bound = [r for r in data["questions"] if r.get("budget_bound")]
            fill = {"max_total_tokens": data["max_total_tokens"],
                    "prompt_tokens_mean": round(statistics.mean(r.get("prompt_tokens", 0) for r in data["questions"])),
                    "fill": round(statistics.mean(r.get("prompt_tokens", 0) for r in data["questions"])
                                  / data["max_total_tokens"], 3),
                    "budget_bound_share": round(len(bound) / len(data["questions"]), 2),
                    "fill_when_bound": round(statistics.mean(r["prompt_tokens"] for r in bound)
                                             / data["max_total_tokens"], 3) if bound else None}
        table[mode] = {
            **summarise(rows), **halves, **fill,
            "context_tokens_mean": round(statistics.mean(r["context_tokens"] for r in data["questions"])),
            "chunks_mean": round(statistics.mean(len(r["chunks"]) for r in data["questions"]), 1),
            **data["latency"],
            **{f"framework_{k}": v for k, v in data.get("framework_latency", {}).items()},
            **{f"embedding_{k}": v for k, v in data.get("embedding_latency", {}).items()},
        }
    write_json(args.out, table)


def _version() -> str:
    import ragkit

    return ragkit.__version__


def check_embedder() -> None:
    import numpy as np

    from ragkit.testing import HashEmbedder

    texts = ["Alice met Bob in Paris.", "", "电影 film 1999"]
    ours = hash_embed(texts, 384)
    theirs = asyncio.run(HashEmbedder({"dimension": 384}).embed(texts))
    assert np.allclose(ours, theirs), "benchmarks/_shared.hash_embed drifted from ragkit.testing.HashEmbedder"
    print("hash embedder: identical to ragkit.testing.HashEmbedder")


def add_rag_args(p: argparse.ArgumentParser) -> None:
    """The options ``make_rag`` and ``query_param`` read, with the defaults every
    ragkit harness script shares (LightRAG's worker mirrors them in its own venv)."""
    p.add_argument("--dimension", type=int, default=384)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--gleaning", type=int, default=0)
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--chunk-top-k", type=int, default=20)
    p.add_argument("--max-entity-tokens", type=int, default=6000)
    p.add_argument("--max-relation-tokens", type=int, default=8000)
    p.add_argument("--max-total-tokens", type=int, default=30000)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", choices=["prepare", "quality", "throughput", "scale", "score", "check-embedder"])
    p.add_argument("--inputs", default=None)
    p.add_argument("--out")
    p.add_argument("--run-file", dest="run_file")
    p.add_argument("--questions", default=None, help="questions file (default: the MuSiQue dev questions)")
    p.add_argument("--docs", type=int, default=0, help="first N passages (0: all)")
    p.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    p.add_argument("--st-backend", choices=["onnx", "torch"], default="onnx",
                   help="quality: the sentence-transformers plugin's backend for MiniLM")
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--jitter", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--factor", type=int, default=1)
    p.add_argument("--warm-up", type=int, default=1,
                   help="scale: untimed rounds of every question in every mode before the timed one")
    p.add_argument("--backend", default="embedded")
    p.add_argument("--backend-settings", default="", help="JSON: Settings sections for the scale run")
    p.add_argument("--workspace", default="", help="scale: the workspace (on shared servers, one per run)")
    p.add_argument("--modes", default=",".join(MODES + RAGKIT_ONLY_MODES), help="quality: modes to run")
    p.add_argument("--workdir", help="quality: keep the index here and reuse it on the next run")
    p.add_argument("--variants", action="store_true",
                   help="quality: also every graph mode with chunk_ranking=similarity (as MODE/similarity), "
                        "and every mode with MiniLM on torch (as MODE/torch)")
    p.add_argument("--lexical", choices=["auto", "on", "off"], default="auto",
                   help="quality: the lexical channel (BM25 over chunks) where the mode uses it, everywhere, nowhere")
    p.add_argument("--chunk-ranking", choices=["support", "similarity"], default="support",
                   help="QueryParam.chunk_ranking of the quality run (ragkit's default: support)")
    p.add_argument("--sweep", default="",
                   help="quality: also every mode at these total budgets, comma list (as MODE@TOKENS)")
    p.add_argument("--equal-tokens", default="",
                   help='quality: JSON {mode: tokens}: also each mode at that total budget (as MODE@lightrag)')
    add_rag_args(p)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.run == "prepare":
        prepare(args)
    elif args.run == "check-embedder":
        check_embedder()
    elif args.run == "score":
        args.run = args.run_file
        score(args)
    else:
        run = {"quality": run_quality, "throughput": run_throughput, "scale": run_scale}[args.run]
        write_json(args.out, asyncio.run(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
