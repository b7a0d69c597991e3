"""Liveness (public), readiness and metrics (a key; metrics need admin scope)."""

from __future__ import annotations

import asyncio
from dataclasses import fields

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from ragkit.redact import redact
from ragkit.server.context import require_key

router = APIRouter(tags=["system"])


@router.get("/health", summary="Liveness: the process answers (no key needed, says nothing else)")
async def health() -> dict:
    return {"status": "ok"}


async def _check(store) -> str:
    counter = getattr(store, "node_count", None) or store.count
    await asyncio.wait_for(counter(), timeout=10)
    return "ok"


@router.get("/ready", summary="Readiness: every configured store answers", dependencies=[Depends(require_key("read"))])
async def ready(request: Request) -> JSONResponse:
    state = request.app.state.ragkit
    checks: dict[str, str] = {}
    async with state.pool.lease(state.settings.workspace) as rag:
        for name in (f.name for f in fields(rag.stores)):  # the stores, not the lock beside them
            store = getattr(rag.stores, name)
            try:
                checks[name] = await _check(store)
            except Exception as exc:
                checks[name] = redact(f"{type(exc).__name__}: {exc}")
    ok = all(v == "ok" for v in checks.values())
    return JSONResponse({"ready": ok, "stores": checks}, status_code=200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics (admin scope)", dependencies=[Depends(require_key("admin"))])
async def metrics(request: Request) -> Response:
    return Response(request.app.state.ragkit.metrics.render(), media_type=CONTENT_TYPE_LATEST)
