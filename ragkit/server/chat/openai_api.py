"""OpenAI-compatible chat: ``GET /v1/models``, ``GET /v1/models/{model}`` and
``POST /v1/chat/completions`` (plain, or SSE with ``stream: true``).

Responses use OpenAI's field names exactly; ``references`` (a list of
``Reference`` records) is an extra top-level field of the completion and of
the last streamed chunk, which the official client keeps in ``model_extra``.
Sampling options (``temperature``, ``max_tokens``...) are accepted and not
used: the configured LLM answers with its own settings.
"""

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ragkit.server.chat.answer import Answered, ask
from ragkit.server.chat.context import ChatContext, ChatLimits, ContextDependency
from ragkit.server.chat.errors import ChatError, as_chat_error, protocol_route
from ragkit.server.chat.turns import mode_of_model, model_names, turns_of


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")  # name, tool_calls...: not used

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        other = sorted({p.type for p in self.content if p.type != "text"})
        if other:
            raise ChatError(400, f"content parts of type {', '.join(other)} are not supported: send text only",
                            param="messages", code="unsupported_content")
        return "".join(p.text or "" for p in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # sampling options ragkit does not use

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=1, description="ragkit writes one answer per request")


def render_error(err: ChatError) -> JSONResponse:
    body = {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}
    return JSONResponse(body, status_code=err.status, headers=err.headers)


def openai_router(context: ContextDependency, limits: ChatLimits | None = None) -> APIRouter:
    """The OpenAI-compatible routes; every one depends on ``context``."""
    limits = limits or ChatLimits()
    router = APIRouter(tags=["chat: OpenAI"], route_class=protocol_route(render_error),
                       dependencies=[Depends(context)])
    created = int(time.time())

    @router.get("/v1/models", summary="List models (one per query mode)")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [_model(name, created) for name in model_names()]}

    @router.get("/v1/models/{model}", summary="Describe one model")
    async def get_model(model: str) -> dict[str, Any]:
        mode_of_model(model)  # 404 naming the models when unknown
        return _model(model, created)

    @router.post("/v1/chat/completions", summary="Answer the conversation's last user message")
    async def chat_completions(body: ChatCompletionRequest, ctx: ChatContext = Depends(context)) -> Any:
        turns = turns_of([(_role(m.role), m.text()) for m in body.messages], body.model, limits)
        answered = await ask(ctx, turns, body.stream)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        if body.stream:
            usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(_sse(answered, completion_id, usage), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        text = await answered.full_text()
        return JSONResponse({  # plain JSON types already: no jsonable_encoder pass
            "id": completion_id, "object": "chat.completion", "created": int(time.time()),
            "model": answered.model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(answered), "references": answered.references,
        })

    return router


def _role(role: str) -> str:
    return "system" if role == "developer" else role


def _model(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "ragkit"}


def _usage(answered: Answered) -> dict[str, int]:
    prompt, completion = answered.usage()
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _sse(answered: Answered, completion_id: str, include_usage: bool) -> AsyncIterator[str]:
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": answered.model, "system_fingerprint": None}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _event({**head, "choices": [choice], **extra})

    yield chunk({"role": "assistant", "content": ""})
    try:
        async for piece in answered.pieces():
            yield chunk({"content": piece})
    except Exception as exc:  # headers are sent: the error goes as an event, which the client raises
        err = as_chat_error(exc)
        yield _event({"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}})
        return
    yield chunk({}, "stop", references=answered.references)
    if include_usage:
        yield _event({**head, "choices": [], "usage": _usage(answered)})
    yield "data: [DONE]\n\n"


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
