"""Graph: search entities, one entity or relation with its sources, a bounded
neighbourhood, edits (write scope, through the workspace's writer), export.

Names travel in query strings and JSON bodies, never in the path: an entity
name may hold any character, ``/`` included.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask

from ragkit.core.files import private_dir
from ragkit.server.context import RequestContext, model_response, read_context, write_context
from ragkit.server.jobs import server_dir

router = APIRouter(prefix="/w/{workspace}/graph", tags=["graph"])


async def _found(value: BaseModel | None) -> Response:
    if value is None:
        raise HTTPException(404, "not found in this workspace (or not readable with this key)")
    return await model_response(value)


@router.get("/entities", summary="Search entities by name")
async def search_entities(
    q: Annotated[str, Query(min_length=1, description="text the name contains")],
    limit: Annotated[int, Query(ge=1, le=1000)] = 20, ctx: RequestContext = Depends(read_context),
) -> Any:
    return jsonable_encoder(await ctx.rag.asearch_entities(q, limit=limit, **ctx.read_options()))


@router.get("/entity", summary="One entity with its sources")
async def entity(name: Annotated[str, Query(min_length=1)], ctx: RequestContext = Depends(read_context)) -> Response:
    return await _found(await ctx.rag.aentity(name, **ctx.read_options()))


@router.get("/relation", summary="One relation with its sources")
async def relation(
    source: Annotated[str, Query(min_length=1)], target: Annotated[str, Query(min_length=1)],
    ctx: RequestContext = Depends(read_context),
) -> Response:
    return await _found(await ctx.rag.arelation(source, target, **ctx.read_options()))


@router.get("/subgraph", summary="The neighbourhood of an entity, bounded")
async def subgraph(
    name: Annotated[str, Query(min_length=1)],
    depth: Annotated[int, Query(ge=0, le=5)] = 1,
    max_nodes: Annotated[int, Query(ge=1, le=10000)] = 200,
    max_edges: Annotated[int, Query(ge=0, le=100000)] = 1000,
    ctx: RequestContext = Depends(read_context),
) -> Response:
    return await _found(await ctx.rag.asubgraph(name, depth=depth, max_nodes=max_nodes, max_edges=max_edges, **ctx.read_options()))


class EntityIn(BaseModel):
    name: str = Field(min_length=1)
    type: str = "entity"
    description: str = ""


class EntityEdit(BaseModel):
    name: str = Field(min_length=1)
    description: str | None = None
    type: str | None = None
    new_name: str | None = None
    """Rename the entity (its relations follow)."""


class MergeIn(BaseModel):
    sources: list[str] = Field(min_length=1)
    target: str = Field(min_length=1)


class RelationIn(BaseModel):
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    keywords: str = ""
    description: str = ""
    strength: float = 1.0


class RelationEdit(BaseModel):
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    keywords: str | None = None
    description: str | None = None
    weight: float | None = None


async def _write(request: Request, ctx: RequestContext, work) -> Any:
    """A write in the workspace's writer, made as the key's principal: it sees,
    changes and answers with only what that principal may read."""
    return jsonable_encoder(await request.app.state.ragkit.jobs.run_write(ctx.workspace, work))


@router.post("/entities", summary="Create an entity (write scope)")
async def create_entity(request: Request, body: EntityIn, ctx: RequestContext = Depends(write_context)) -> Any:
    return await _write(request, ctx, lambda rag: rag.acreate_entity(body.name, body.type, body.description, **ctx.write_options()))


@router.patch("/entity", summary="Edit or rename an entity (write scope)")
async def edit_entity(request: Request, body: EntityEdit, ctx: RequestContext = Depends(write_context)) -> Any:
    async def work(rag):
        out = None
        if body.description is not None or body.type is not None:
            out = await rag.aedit_entity(body.name, description=body.description, type=body.type, **ctx.write_options())
        if body.new_name:
            out = await rag.arename_entity(body.name, body.new_name, **ctx.write_options())
        return out

    return await _write(request, ctx, work)


@router.delete("/entity", summary="Delete an entity and its relations (write scope)")
async def delete_entity(request: Request, name: Annotated[str, Query(min_length=1)], ctx: RequestContext = Depends(write_context)) -> Any:
    await _write(request, ctx, lambda rag: rag.adelete_entity(name, **ctx.write_options()))
    return {"deleted": name}


@router.post("/merge", summary="Merge entities into one (write scope)")
async def merge(request: Request, body: MergeIn, ctx: RequestContext = Depends(write_context)) -> Any:
    return await _write(request, ctx, lambda rag: rag.amerge_entities(body.sources, body.target, **ctx.write_options()))


@router.post("/relations", summary="Create a relation (write scope)")
async def create_relation(request: Request, body: RelationIn, ctx: RequestContext = Depends(write_context)) -> Any:
    return await _write(
        request, ctx, lambda rag: rag.acreate_relation(
            body.source, body.target, body.keywords, body.description, body.strength, **ctx.write_options()
        )
    )


@router.patch("/relation", summary="Edit a relation (write scope)")
async def edit_relation(request: Request, body: RelationEdit, ctx: RequestContext = Depends(write_context)) -> Any:
    return await _write(
        request, ctx,
        lambda rag: rag.aedit_relation(
            body.source, body.target, keywords=body.keywords, description=body.description, weight=body.weight,
            **ctx.write_options(),
        ),
    )


@router.delete("/relation", summary="Delete a relation (write scope)")
async def delete_relation(
    request: Request, source: Annotated[str, Query(min_length=1)], target: Annotated[str, Query(min_length=1)],
    ctx: RequestContext = Depends(write_context),
) -> Any:
    await _write(request, ctx, lambda rag: rag.adelete_relation(source, target, **ctx.write_options()))
    return {"deleted": [source, target]}


_MEDIA = {"json": "application/json", "graphml": "application/graphml+xml"}


@router.get("/export", summary="The graph and its sources as JSON or GraphML (a download)")
async def export(
    request: Request, format: Literal["json", "graphml"] = "json", ctx: RequestContext = Depends(read_context),
) -> FileResponse:
    # Written inside the workspace's folder (nothing outside working_dir), removed once sent.
    folder = server_dir(request.app.state.ragkit.settings.working_dir, ctx.workspace) / "exports"
    private_dir(folder)
    tmp = tempfile.mkdtemp(dir=folder)
    path = f"{tmp}/{uuid.uuid4().hex}.{format}"
    try:
        await ctx.rag.aexport(path, format, **ctx.read_options())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return FileResponse(
        path, media_type=_MEDIA[format], filename=f"{ctx.workspace}.{format}",
        background=BackgroundTask(shutil.rmtree, tmp, ignore_errors=True),
    )
