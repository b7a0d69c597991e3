"""Liveness (public), readiness and metrics (a key; metrics need admin scope)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import fields
from pathlib import Path

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from ragkit.errors import public_message
from ragkit.protocols.models import ChatRequest
from ragkit.rag import RAG
from ragkit.redact import redact
from ragkit.server.context import require_key
from ragkit.server.keys import ApiKey
from ragkit.settings import WORKSPACE_PATTERN

router = APIRouter(tags=["system"])
log = logging.getLogger(__name__)


@router.get("/health", summary="Liveness: the process answers (no key needed, says nothing else)")
async def health() -> dict:
    return {"status": "ok"}


async def _check(store) -> str:
    counter = getattr(store, "node_count", None) or store.count
    await asyncio.wait_for(counter(), timeout=10)
    return "ok"


@router.get("/ready", summary="Readiness: every configured store and model answers")
async def ready(request: Request, key: ApiKey | None = Depends(require_key("read"))) -> JSONResponse:
    state = request.app.state.ragkit
    checks: dict[str, str] = {}
    workspace = _checked_workspace(state, key)
    if workspace is None:  # a read creates no workspace: the models alone are checked
        async with _scratch(state) as rag:
            models = await _models(rag, state.model_checks)
    else:
        async with state.pool.lease(workspace, create=False) as rag:
            for name in (f.name for f in fields(rag.stores)):  # the stores, not the lock beside them
                checks[name] = await _guarded(_check(getattr(rag.stores, name)), name)
            models = await _models(rag, state.model_checks)
    ok = all(v == "ok" for v in checks.values()) and all(v == "ok" for v in models.values())
    return JSONResponse({"ready": ok, "stores": checks, "models": models}, status_code=200 if ok else 503)


def _checked_workspace(state, key) -> str | None:
    """An existing workspace this key may read, the default one first: its
    stores are the ones checked (none: no workspace exists for this key yet)."""
    names = sorted(p.name for p in Path(state.settings.working_dir).iterdir()
                   if p.is_dir() and WORKSPACE_PATTERN.fullmatch(p.name)) if Path(state.settings.working_dir).is_dir() else []
    candidates = [state.settings.workspace, *names]
    return next((w for w in candidates if state.pool.exists(w) and (key is None or key.allows(w, "read"))), None)


@contextlib.asynccontextmanager
async def _scratch(state):
    """The models, without a workspace: a RAG whose stores are never opened."""
    rag = RAG(state.settings)
    try:
        yield rag
    finally:
        await rag.aclose()


MODEL_CHECK_SECONDS = 60.0
"""How long a model check stands: probes come every few seconds, and a call to
a hosted model costs money, so the models are asked at most once a minute."""


async def _models(rag, cache: dict[str, tuple[float, str]]) -> dict[str, str]:
    """The embedder, the reranker and the LLM each make one tiny call."""
    calls = {"embedder": lambda: rag.embedder.embed(["ready"])}
    if rag.reranker is not None:
        calls["reranker"] = lambda: rag.reranker.scores("ready", ["ready"])
    if rag.settings.llm is not None:  # uncached: the answer cache would say yes for a dead model
        calls["llm"] = lambda: rag.llm.complete(ChatRequest(prompt="Say OK.", role="other"), use_cache=False)
    out = {}
    for name, call in calls.items():
        at, result = cache.get(name, (0.0, ""))
        if time.monotonic() - at > MODEL_CHECK_SECONDS or result != "ok":
            result = await _guarded(_called(call), name)
            cache[name] = (time.monotonic(), result)
        out[name] = result
    return out


async def _called(call) -> str:
    await asyncio.wait_for(call(), timeout=30)
    return "ok"


async def _guarded(check, name: str) -> str:
    """"ok", or what went wrong as any read key may see it: a model's cause,
    not its server's URL or words (``public_message``); the whole error is logged."""
    try:
        return await check
    except TimeoutError:  # the check's own time limit: nothing from the backend to hide
        log.warning("ready: the %s check timed out", name)
        return "TimeoutError: no answer within the check's time limit"
    except Exception as exc:  # reported per backend; the others are still checked
        log.warning("ready: the %s check failed: %s", name, redact(f"{type(exc).__name__}: {exc}", exc=exc))
        return public_message(exc)


@router.get("/metrics", summary="Prometheus metrics (admin scope)", dependencies=[Depends(require_key("admin"))])
async def metrics(request: Request) -> Response:
    return Response(request.app.state.ragkit.metrics.render(), media_type=CONTENT_TYPE_LATEST)
