"""What the web UI needs beyond the other routes, each usable with curl too:
who a key is (its workspaces, scope and the query modes), passages by chunk
id (a citation's or a graph item's sources), the access lists of documents
(admins) and a retry of failed documents (write keys).

The rule of every read route holds: nothing of a document the key's
principal may not read, not even whether it exists. The web UI's static
shell (``ragkit.server.webui``) is served without a key; every route here
needs one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from pydantic import BaseModel, Field

from ragkit.access import allows
from ragkit.schema import DocStatus
from ragkit.server.context import FORBIDDEN, RequestContext, read_context, require_key, write_context
from ragkit.server.keys import ApiKey
from ragkit.settings import WORKSPACE_PATTERN

router = APIRouter(tags=["web UI"])
MAX_IDS = 200
"""Ids per call: a citation has a few chunks, an entity rarely more than this."""


@router.get("/session", summary="The key's user, groups, scope and workspaces, and the query modes")
async def session(request: Request, key: ApiKey | None = Depends(require_key("read"))) -> dict:
    from ragkit.plugins import get_registry

    state = request.app.state.ragkit
    registry = get_registry()
    modes = [{"name": n, "description": registry.get("query_mode", n).description} for n in registry.names("query_mode")]
    return {
        "user": key.user if key else None,
        "groups": key.groups if key else [],
        "scope": key.scope if key else "admin",
        "workspaces": _workspaces(state, key),
        "default_mode": "ppr",
        "modes": modes,
    }


def _workspaces(state, key: ApiKey | None) -> list[str]:
    """The workspaces a key is bound to by name, and for ``*`` (or keyless)
    the ones that exist now, the settings' default among them."""
    named = [] if key is None else [w for w in key.workspaces if w != "*"]
    if key is not None and "*" not in key.workspaces:
        return sorted(named)
    root = Path(state.settings.working_dir)
    found = {p.name for p in root.iterdir() if p.is_dir() and WORKSPACE_PATTERN.fullmatch(p.name)} if root.is_dir() else set()
    existing = {w for w in found if state.pool.exists(w)}
    return sorted(existing | set(named) | {state.settings.workspace})


@router.get("/w/{workspace}/chunks", summary="Passages by chunk id, with document, page and section")
async def chunks(
    id: Annotated[list[str], Query(min_length=1, max_length=MAX_IDS, description="chunk ids")],
    ctx: RequestContext = Depends(read_context),
) -> dict:
    """Unknown ids and chunks of documents the principal may not read are
    left out alike (``missing``), so the answer says nothing of hidden ones."""
    stores = ctx.rag.stores
    await ctx.rag.aopen()
    wanted = list(dict.fromkeys(id))
    found = await stores.chunks.get_many(wanted)
    doc_ids = sorted({c["doc_id"] for c in found if c})
    records = {r.id: r for r in await stores.doc_status.get(doc_ids) if r is not None}
    out = []
    for chunk_id, chunk in zip(wanted, found):
        record = records.get(chunk["doc_id"]) if chunk else None
        if record is None or not allows(record.access, ctx.principal):
            continue
        out.append({"id": chunk_id, "doc_id": chunk["doc_id"], "file_path": chunk.get("file_path"),
                    "order": chunk.get("order"), "content": chunk["content"], "location": chunk.get("location")})
    shown = {c["id"] for c in out}
    return {"chunks": out, "missing": [i for i in wanted if i not in shown]}


@router.get("/w/{workspace}/documents-access", summary="Documents' access lists (admin scope)")
async def documents_access(
    id: Annotated[list[str], Query(min_length=1, max_length=1000, description="document ids")],
    ctx: RequestContext = Depends(read_context),
) -> dict:
    """``null``: readable by everyone in the workspace. Documents the admin
    key's own principal may not read are left out, as everywhere. (The read
    dependency, then the scope: an admin's read must not create a workspace.)"""
    if ctx.key is not None and ctx.key.scope != "admin":
        raise HTTPException(403, FORBIDDEN)
    await ctx.rag.aopen()
    records = await ctx.rag.stores.doc_status.get(list(dict.fromkeys(id)))
    return {"access": {r.id: (r.access.model_dump() if r.access else None)
                       for r in records if r is not None and allows(r.access, ctx.principal)}}


class RetryIn(BaseModel):
    ids: list[str] = Field(min_length=1, max_length=1000)
    """Ids of failed documents; nothing is retried if one is unknown, hidden or not failed."""


@router.post("/w/{workspace}/documents/retry", summary="Index failed documents again (write scope)")
async def retry_documents(request: Request, body: RetryIn, ctx: RequestContext = Depends(write_context)) -> dict:
    """From the text and pages kept when they were loaded, with their access
    lists; answers already cached cost no new model calls. Waits for the run."""
    await ctx.rag.aopen()
    ids = list(dict.fromkeys(body.ids))
    records = await ctx.rag.stores.doc_status.get(ids)
    for doc_id, record in zip(ids, records):
        if record is None or not allows(record.access, ctx.principal):  # hidden: as absent
            raise HTTPException(404, f"no document {doc_id!r} in this workspace; list them at GET .../documents")
        if record.status != DocStatus.FAILED:
            raise HTTPException(409, f"document {doc_id!r} is {record.status.value}, not failed; only failed documents are retried")
    work = lambda rag: rag.indexer().recover(only=set(ids))  # noqa: E731
    await request.app.state.ragkit.jobs.run_write(ctx.workspace, work)
    after = await ctx.rag.stores.doc_status.get(ids)
    return {"documents": [{"id": r.id, "status": r.status.value, "error": r.error} for r in after if r is not None]}
