"""``ragkit doctor``: a write/read round trip through every configured backend.

Each store gets a scratch namespace, a record written, flushed, read back by a
*fresh* instance (so persistence is exercised, not just memory), then dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from ragkit.backends import build_model, build_store
from ragkit.cli.output import print_json, table
from ragkit.errors import RagkitError
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest
from ragkit.redact import redact
from ragkit.schema import DocStatusRecord
from ragkit.settings import Settings, load_settings

NAMESPACE = "doctor"
SAMPLE = "Project Haijia buys control boards from Yingchuan. 海佳项目从盈川采购控制板。"


async def _reopen(settings: Settings, kind: str, dim: int | None, check: Callable) -> str:
    store = build_store(settings, kind, NAMESPACE, dim)
    await store.open()
    try:
        return await check(store)
    finally:
        await store.drop()
        await store.close()


async def _roundtrip(settings: Settings, kind: str, write: Callable, check: Callable, dim: int | None = None) -> str:
    store = build_store(settings, kind, NAMESPACE, dim)
    await store.open()
    await store.drop()
    await write(store)
    await store.close()
    persistent = Capability.PERSISTENT in type(store).capabilities
    if not persistent:  # a fresh instance of a memory store is empty by design
        await store.open()
        try:
            return await check(store) + " (not persistent)"
        finally:
            await store.drop()
            await store.close()
    return await _reopen(settings, kind, dim, check)


def _expect(ok: bool, what: str) -> str:
    if not ok:
        raise RagkitError(f"read back a different {what} than was written")
    return f"wrote and read back {what}"


async def _checks(settings: Settings) -> list[tuple[str, Callable[[], Awaitable[str]]]]:
    embedder = build_model(settings, "embedder")
    tokenizer = build_model(settings, "tokenizer")
    vec = (await embedder.embed([SAMPLE]))[0]
    dim = embedder.dimension

    async def kv() -> str:
        rec = {"text": SAMPLE}
        return await _roundtrip(
            settings, "kv", lambda s: s.upsert({"k": rec}),
            lambda s: _aexpect(s.get("k"), rec, "a record"),
        )

    async def vector() -> str:
        return await _roundtrip(
            settings, "vector", lambda s: s.upsert(["v"], [vec], [{"lang": "mixed"}]),
            lambda s: _ahit(s.query(vec, 1)), dim,
        )

    async def graph() -> str:
        return await _roundtrip(
            settings, "graph", lambda s: s.upsert_edge("Haijia", "Yingchuan", {"keywords": "buys from"}),
            lambda s: _aexpect(s.get_edge("Yingchuan", "Haijia"), {"keywords": "buys from"}, "an edge"),
        )

    async def doc_status() -> str:
        rec = DocStatusRecord(id="doc-1", content_hash="x")
        return await _roundtrip(
            settings, "doc_status", lambda s: s.upsert([rec]),
            lambda s: _aexpect(_first(s.get(["doc-1"])), rec, "a status record"),
        )

    async def models() -> str:
        out = f"embedder {embedder.model_id} dim {dim}; tokenizer {tokenizer.name}: {tokenizer.count(SAMPLE)} tokens"
        llm = build_model(settings, "llm")
        if llm is not None:
            reply = await llm.complete(ChatRequest(prompt="Say OK.", role="other"))
            out += f"; llm {llm.model_id} answered {len(reply.text)} chars"
        return out

    return [("kv", kv), ("vector", vector), ("graph", graph), ("doc_status", doc_status), ("models", models)]


async def _first(aw):
    return (await aw)[0]


async def _aexpect(aw, expected, what: str) -> str:
    return _expect(await aw == expected, what)


async def _ahit(aw) -> str:
    hits = await aw
    return _expect(len(hits) == 1 and hits[0].id == "v" and hits[0].score > 0.999, "a vector")


async def diagnose(settings: Settings) -> list[dict[str, str]]:
    results = []
    for kind, check in await _checks(settings):
        backend = getattr(settings, kind, None)
        started = time.perf_counter()
        try:
            detail, ok = await check(), "ok"
        except Exception as exc:  # reported per backend; the others still run
            detail, ok = redact(f"{type(exc).__name__}: {exc}", exc=exc), "FAILED"
        results.append(
            {
                "check": kind,
                "adapter": backend.name if backend is not None and hasattr(backend, "name") else "-",
                "status": ok,
                "ms": f"{(time.perf_counter() - started) * 1000:.0f}",
                "detail": detail,
            }
        )
    return results


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config).settings
    results = asyncio.run(diagnose(settings))
    if args.json:
        print_json(results)
    else:
        print(f"workspace {settings.workspace!r} in {settings.working_dir}")
        print(table(["check", "adapter", "status", "ms", "detail"], [list(r.values()) for r in results]))
    return 0 if all(r["status"] == "ok" for r in results) else 1
