"""Query: answer, streamed answer (NDJSON), context only, prompt only.

The body is ``QueryParam`` itself plus ``question``: every field, every
registered mode (``ppr`` included), validated by the Python API's own model.
"""

from __future__ import annotations

import json
import logging

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import Field

from ragkit.errors import public_message
from ragkit.redact import redact
from ragkit.schema import QueryParam, QueryResult
from ragkit.server.context import RequestContext, model_response, read_context

router = APIRouter(prefix="/w/{workspace}", tags=["query"])
log = logging.getLogger(__name__)


class QueryIn(QueryParam):
    question: str = Field(min_length=1)


def _param(body: QueryIn, **force: bool) -> QueryParam:
    return QueryParam.model_validate({**body.model_dump(exclude={"question"}), **force})


def _result(result: QueryResult) -> dict:
    return result.model_dump(mode="json")


@router.post("/query", summary="Answer a question, with references")
async def query(body: QueryIn, ctx: RequestContext = Depends(read_context)) -> Response:
    return await model_response(await ctx.rag.aquery(body.question, _param(body, stream=False), **ctx.read_options()))


@router.post("/query/context", summary="The retrieved context only (no answer call)")
async def query_context(body: QueryIn, ctx: RequestContext = Depends(read_context)) -> Response:
    param = _param(body, stream=False, only_need_context=True, only_need_prompt=False)
    return await model_response(await ctx.rag.aquery(body.question, param, **ctx.read_options()))


@router.post("/query/prompt", summary="The answer prompt only (no answer call)")
async def query_prompt(body: QueryIn, ctx: RequestContext = Depends(read_context)) -> Response:
    param = _param(body, stream=False, only_need_prompt=True, only_need_context=False)
    return await model_response(await ctx.rag.aquery(body.question, param, **ctx.read_options()))


@router.post("/query/stream", summary="The answer as NDJSON: {\"delta\"} lines, then {\"done\", references...}")
async def query_stream(request: Request, body: QueryIn, ctx: RequestContext = Depends(read_context)) -> StreamingResponse:
    result = await ctx.rag.aquery(body.question, _param(body, stream=True), **ctx.read_options())
    pool = request.app.state.ragkit.pool

    async def lines():
        # The stream outlives the request's lease: hold one of its own.
        async with pool.lease(ctx.workspace):
            try:
                if result.stream is not None:
                    async for piece in result.stream:
                        yield json.dumps({"delta": piece}) + "\n"
                yield json.dumps({"done": True, **_result(result)}) + "\n"
            except Exception as exc:  # the status line is sent: report in the stream
                log.warning("streamed answer failed: %s", redact(f"{type(exc).__name__}: {exc}", exc=exc))
                yield json.dumps({"error": public_message(exc)}) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")
