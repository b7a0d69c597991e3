"""Documents: upload and insert (background jobs), list, get, delete; jobs."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from ragkit import access
from ragkit.errors import WriteAccessError, describe_validation_error
from ragkit.core.files import private_dir
from ragkit.core.text import shown_name
from ragkit.pipeline.identity import check_writable

from ragkit.server.context import RequestContext, read_context, write_context
from ragkit.server.jobs import TERMINAL, Job, JobInput
from ragkit.server.uploads import check_count, check_type, save

router = APIRouter(prefix="/w/{workspace}", tags=["documents"])


class AccessList(BaseModel):
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class TextsIn(BaseModel):
    texts: list[str] = Field(min_length=1)
    file_paths: list[str | None] | None = None
    """A name per text (shown in references); default none."""
    access: AccessList | None = None
    """Who may read these documents (none: everyone in the workspace)."""


class DeleteIn(BaseModel):
    ids: list[str] = Field(min_length=1)
    """Document ids or the paths they were indexed from; nothing is deleted if one is unknown."""


def _accepted(request: Request, job: Job) -> JSONResponse:
    url = str(request.url_for("get_job", workspace=job.workspace, job_id=job.id))
    return JSONResponse({"job": job.view(), "url": url}, status_code=202, headers={"Location": url})


def _access(users: list[str], groups: list[str], field: str) -> dict | None:
    """The access list as the job keeps it, checked now (422 naming the field)
    so that a bad name never becomes a failed job."""
    users, groups = [u for u in users if u], [g for g in groups if g]
    if not users and not groups:
        return None
    try:
        checked = access.AccessList(users=users, groups=groups)
    except ValidationError as exc:
        raise HTTPException(422, f"{field}: {describe_validation_error(exc)}. Fix: use plain user and group names") from None
    return checked.model_dump()


@router.post("/documents/upload", status_code=202, summary="Upload files (multipart); returns the ingestion job")
async def upload(
    request: Request,
    files: Annotated[list[UploadFile], File(description="one or more files")],
    access_users: Annotated[list[str], Form()] = [],
    access_groups: Annotated[list[str], Form()] = [],
    ctx: RequestContext = Depends(write_context),
) -> JSONResponse:
    state = request.app.state.ragkit
    limits = state.settings.server
    check_count(len(files), limits)
    names = [check_type(f.filename or "") for f in files]
    job = _new_job(ctx, _access(access_users, access_groups, "access_users/access_groups"))
    folder = state.jobs.upload_dir(job)
    private_dir(folder)
    try:
        for n, (f, name) in enumerate(zip(files, names)):
            saved = f"{n:05d}{name[name.rfind('.'):].lower()}"
            await save(f, folder / saved, limits)
            job.inputs.append(JobInput(file=saved, name=name))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _accepted(request, state.jobs.submit(job))


@router.post("/documents/texts", status_code=202, summary="Insert texts; returns the ingestion job")
async def insert_texts(request: Request, body: TextsIn, ctx: RequestContext = Depends(write_context)) -> JSONResponse:
    state = request.app.state.ragkit
    check_count(len(body.texts), state.settings.server)
    names = [None if n is None else shown_name(n) for n in body.file_paths or [None] * len(body.texts)]
    if len(names) != len(body.texts):
        raise HTTPException(422, "file_paths: give one per text (or none). Fix: match the lengths")
    listed = body.access or AccessList()
    job = _new_job(ctx, _access(listed.users, listed.groups, "access"))
    folder = state.jobs.upload_dir(job)
    private_dir(folder)
    for n, (text, name) in enumerate(zip(body.texts, names)):
        if len(text.encode()) > state.settings.server.max_upload_bytes:
            shutil.rmtree(folder, ignore_errors=True)
            raise HTTPException(413, f"texts[{n}] is over the limit of {state.settings.server.max_upload_bytes} bytes ([server] max_upload_bytes)")
        (folder / f"{n:05d}.txt").write_text(text, encoding="utf-8")
        job.inputs.append(JobInput(file=f"{n:05d}.txt", name=name))
    return _accepted(request, state.jobs.submit(job))


@router.get("/documents", summary="List documents (paged, optionally one status)")
async def list_documents(
    status: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 100, cursor: str | None = None,
    ctx: RequestContext = Depends(read_context),
) -> dict:
    page = await ctx.rag.adocuments(status, limit, cursor, **ctx.read_options())
    return page.model_dump(mode="json")


@router.get("/documents/{doc_id}", summary="One document's status record")
async def get_document(doc_id: str, ctx: RequestContext = Depends(read_context)) -> dict:
    cursor = None
    # Through the listing, which applies the principal's access (one page is enough for most).
    while True:
        page = await ctx.rag.adocuments(None, 1000, cursor, **ctx.read_options())
        for row in page.documents:
            if row.id == doc_id:
                return row.model_dump(mode="json")
        if page.next_cursor is None:
            raise HTTPException(404, f"no document {doc_id!r} in this workspace; list them at GET .../documents")
        cursor = page.next_cursor


async def _delete(request: Request, ctx: RequestContext, ids: list[str]) -> dict:
    """Names resolve among the documents the key's principal may read: a hidden
    one is unknown (404, as an absent one), and nothing is deleted."""
    work = lambda rag: rag.adelete(ids, **ctx.write_options())  # noqa: E731
    return {"deleted": await request.app.state.ragkit.jobs.run_write(ctx.workspace, work)}


@router.delete("/documents/{doc_id}", summary="Delete one document (by id or path)")
async def delete_document(request: Request, doc_id: str, ctx: RequestContext = Depends(write_context)) -> dict:
    return await _delete(request, ctx, [doc_id])


@router.post("/documents/delete", summary="Delete several documents (all or none)")
async def delete_documents(request: Request, body: DeleteIn, ctx: RequestContext = Depends(write_context)) -> dict:
    return await _delete(request, ctx, body.ids)


def _new_job(ctx: RequestContext, listed: dict | None) -> Job:
    """A job written as the key's principal; a list that would hide the
    documents from it is refused now (422), not as a failed job later."""
    if ctx.principal is not None:
        try:
            check_writable(access.AccessList(**listed) if listed else None, ctx.principal)
        except WriteAccessError as exc:
            raise HTTPException(422, f"access: {exc}") from None
    return Job(workspace=ctx.workspace, access=listed, owner=ctx.key.id if ctx.key else None, principal=ctx.principal)


def _job(request: Request, ctx: RequestContext, job_id: str) -> tuple[Job, bool]:
    """The job and whether this key sees it whole: the key that submitted it
    (or any request in keyless mode) does; an admin key sees another key's
    job's state and counts only; any other key gets the 404 of an absent job,
    as the job names files and documents it may not read."""
    job = request.app.state.ragkit.jobs.get(ctx.workspace, job_id)
    mine = job is not None and (ctx.key is None or job.owner == ctx.key.id)
    if job is None or not (mine or ctx.key.scope == "admin"):
        raise HTTPException(404, f"no job {job_id!r} in this workspace")
    return job, mine


@router.get("/jobs/{job_id}", name="get_job", summary="An ingestion job's progress")
async def get_job(request: Request, job_id: str, ctx: RequestContext = Depends(read_context)) -> dict:
    job, whole = _job(request, ctx, job_id)
    return job.view(full=whole)


@router.get("/jobs/{job_id}/events", summary="An ingestion job's progress as NDJSON, until it ends")
async def job_events(request: Request, job_id: str, ctx: RequestContext = Depends(read_context)) -> StreamingResponse:
    state = request.app.state.ragkit
    _, whole = _job(request, ctx, job_id)

    async def lines():
        last = None
        while True:
            job = state.jobs.get(ctx.workspace, job_id)
            view = job.view(full=whole)
            snapshot = {k: v for k, v in view.items() if k not in ("elapsed", "eta")}
            if snapshot != last:
                last = snapshot
                yield json.dumps(view) + "\n"
            if job.state in TERMINAL:
                return
            await asyncio.sleep(0.2)

    return StreamingResponse(lines(), media_type="application/x-ndjson")
