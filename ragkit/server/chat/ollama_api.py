"""Ollama-compatible chat, for Open WebUI and the ``ollama`` client:
``GET /api/version``, ``GET /api/tags``, ``GET /api/ps``, ``POST /api/show``, ``POST /api/chat``
and ``POST /api/generate`` (NDJSON lines when ``stream`` is true, Ollama's
default).

Responses use Ollama's field names; durations are nanoseconds. The last line
(``done: true``) also carries ``references`` (``Reference`` records), which
raw HTTP clients can read; the answer text ends with a references block for
everyone else. ``options``, ``format``, ``keep_alive``, ``images``... are
accepted and not used. An empty conversation or prompt only "loads" the
model (``done_reason: "load"``), as Ollama does.
"""

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from typing import Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragkit.query.modes import available_modes
from ragkit.server.chat.answer import Answered, ask
from ragkit.server.chat.context import ChatContext, ChatLimits, ContextDependency
from ragkit.server.chat.errors import ChatError, as_chat_error, protocol_route
from ragkit.server.chat.turns import MODEL_FAMILY, mode_of_model, model_names, turns_of

OLLAMA_VERSION = "0.9.0"
"""The Ollama API version this emulates (clients such as Open WebUI ask for it)."""


class OllamaMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")  # images, tool_calls, thinking: not used

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""


class OllamaChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # options, format, keep_alive, tools, think

    model: str = Field(min_length=1, max_length=200)
    messages: list[OllamaMessage] = Field(default_factory=list)
    stream: bool = True


class OllamaGenerateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # options, format, keep_alive, raw, template, context

    model: str = Field(min_length=1, max_length=200)
    prompt: str = ""
    system: str | None = None
    stream: bool = True


class OllamaShowRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = Field(default=None, min_length=1, max_length=200)
    name: str | None = Field(default=None, min_length=1, max_length=200, description="older clients' 'model'")

    @model_validator(mode="after")
    def _named(self) -> "OllamaShowRequest":
        if not (self.model or self.name):
            raise ValueError("give the model to show as 'model'")
        return self


def render_error(err: ChatError) -> JSONResponse:
    return JSONResponse({"error": err.message}, status_code=err.status, headers=err.headers)


def ollama_router(context: ContextDependency, limits: ChatLimits | None = None) -> APIRouter:
    """The Ollama-compatible routes; every one depends on ``context``."""
    limits = limits or ChatLimits()
    router = APIRouter(tags=["chat: Ollama"], route_class=protocol_route(render_error),
                       dependencies=[Depends(context)])
    modified = _now()

    @router.get("/api/version", summary="The Ollama API version emulated")
    async def version() -> dict[str, str]:
        return {"version": OLLAMA_VERSION}

    @router.get("/api/tags", summary="List models (one per query mode)")
    async def tags() -> dict[str, Any]:
        return {"models": [_tag(name, modified) for name in model_names()]}

    @router.get("/api/ps", summary="Models loaded in memory (none: a mode loads nothing)")
    async def ps() -> dict[str, Any]:
        return {"models": []}

    @router.post("/api/show", summary="Describe one model")
    async def show(body: OllamaShowRequest) -> dict[str, Any]:
        name = body.model or body.name or ""
        mode = mode_of_model(name)
        description = {m.name: m.description for m in available_modes()}.get(mode, "")
        return {"modelfile": f"# ragkit query mode {mode}: {description}", "parameters": "",
                "template": "{{ .Prompt }}", "details": _details(), "modified_at": modified,
                "model_info": {"general.architecture": MODEL_FAMILY, "ragkit.mode": mode},
                "capabilities": ["completion"]}

    @router.post("/api/chat", summary="Answer the conversation's last user message")
    async def chat(body: OllamaChatRequest, ctx: ChatContext = Depends(context)) -> Any:
        if not body.messages:
            return _loaded(body.model, body.stream, "message")
        turns = turns_of([(m.role, m.content) for m in body.messages], body.model, limits)
        return await _respond(await ask(ctx, turns, body.stream), body.stream, _message)

    @router.post("/api/generate", summary="Answer one prompt")
    async def generate(body: OllamaGenerateRequest, ctx: ChatContext = Depends(context)) -> Any:
        if not body.prompt:
            return _loaded(body.model, body.stream, "response")
        messages = [("system", body.system)] if body.system else []
        turns = turns_of([*messages, ("user", body.prompt)], body.model, limits)
        return await _respond(await ask(ctx, turns, body.stream), body.stream, _response)

    return router


Shape = Callable[[str], dict[str, Any]]
"""Where a text goes: ``message.content`` (chat) or ``response`` (generate)."""


def _message(text: str) -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": text}}


def _response(text: str) -> dict[str, Any]:
    return {"response": text}


async def _respond(answered: Answered, stream: bool, shape: Shape) -> Any:
    if stream:
        return StreamingResponse(_ndjson(answered, shape), media_type="application/x-ndjson")
    text = await answered.full_text()
    # Plain JSON types already: no jsonable_encoder pass.
    return JSONResponse({"model": answered.model, "created_at": _now(), **shape(text), **_final(answered)})


async def _ndjson(answered: Answered, shape: Shape) -> AsyncIterator[str]:
    try:
        async for piece in answered.pieces():
            yield _line({"model": answered.model, "created_at": _now(), **shape(piece), "done": False})
    except Exception as exc:  # headers are sent: Ollama's way is an error line, which the client raises
        yield _line({"error": as_chat_error(exc).message})
        return
    yield _line({"model": answered.model, "created_at": _now(), **shape(""), **_final(answered)})


def _final(answered: Answered) -> dict[str, Any]:
    prompt, completion = answered.usage()
    total, writing = answered.durations()
    return {"done": True, "done_reason": "stop", "total_duration": _ns(total), "load_duration": 0,
            "prompt_eval_count": prompt, "prompt_eval_duration": _ns(total - writing),
            "eval_count": completion, "eval_duration": _ns(writing), "references": answered.references}


def _loaded(model: str, stream: bool, kind: str) -> Any:
    mode_of_model(model)  # an unknown model is a 404 here too
    body = {"model": model, "created_at": _now(), **(_message("") if kind == "message" else _response("")),
            "done": True, "done_reason": "load"}
    if stream:
        return StreamingResponse(iter([_line(body)]), media_type="application/x-ndjson")
    return body


def _tag(name: str, modified: str) -> dict[str, Any]:
    return {"name": name, "model": name, "modified_at": modified, "size": 0,
            "digest": hashlib.sha256(name.encode()).hexdigest(), "details": _details()}


def _details() -> dict[str, Any]:
    return {"parent_model": "", "format": MODEL_FAMILY, "family": MODEL_FAMILY, "families": [MODEL_FAMILY],
            "parameter_size": "", "quantization_level": ""}


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False) + "\n"


def _ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
