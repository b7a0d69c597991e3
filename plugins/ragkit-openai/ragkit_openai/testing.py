"""``OpenAIServer``: a loopback server speaking OpenAI's wire protocol, for
tests with the real ``openai`` client (see ``ragkit.testing.http_server``).

- ``POST {prefix}/chat/completions``: JSON, or server-sent events (``data:``
  lines, a usage chunk when ``stream_options.include_usage``, ``data: [DONE]``);
  answers from ``fake_answer`` (JSON when ``response_format`` asks for it);
- ``POST {prefix}/embeddings``: ``fake_embedding`` rows, ``float`` or ``base64``;
- ``GET {prefix}/models``.

Azure deployments: ``OpenAIServer(prefix="/openai/deployments/NAME", api_key=K,
azure=True)`` checks the ``api-key`` header instead of a bearer token.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.testing.http_server import (
    LoopbackServer,
    Recorded,
    Reply,
    Route,
    count_tokens,
    fake_answer,
    fake_embedding,
    pieces,
)

TEST_KEY = "sk-test-loopback"
DEFAULT_DIMENSION = 32
_ERROR_TYPES = {401: "invalid_request_error", 404: "invalid_request_error", 429: "rate_limit_exceeded"}


class OpenAIServer(LoopbackServer):
    def __init__(
        self,
        prefix: str = "/v1",
        *,
        api_key: str | None = None,
        azure: bool = False,
        dimension: int = DEFAULT_DIMENSION,
        **kwargs: Any,
    ) -> None:
        super().__init__(prefix, api_key=api_key, **kwargs)
        self.azure = azure
        self.dimension = dimension

    def routes(self) -> Mapping[tuple[str, str], Route]:
        return {
            ("POST", "/chat/completions"): self._chat,
            ("POST", "/embeddings"): self._embeddings,
            ("GET", "/models"): self._models,
        }

    def error_reply(self, status: int, message: str) -> Reply:
        kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return Reply(status, json={"error": {"message": message, "type": kind, "param": None, "code": None}})

    def authorized(self, request: Recorded) -> bool:
        if self.azure and self.api_key is not None:
            return request.headers.get("api-key") == self.api_key
        return super().authorized(request)

    # -- routes ---------------------------------------------------------------------

    def not_found_message(self, model: str) -> str:
        return f"The model `{model}` does not exist or you do not have access to it."

    def _chat(self, request: Recorded) -> Reply:
        body = request.body
        if (problem := self.unknown_model(body)) is not None:
            return problem
        json_mode = (body.get("response_format") or {}).get("type") in ("json_object", "json_schema")
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        text = fake_answer(body["messages"], json_mode=json_mode, max_tokens=limit)
        usage = _usage(count_tokens(*(m.get("content") or "" for m in body["messages"])), count_tokens(text))
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return Reply(
                chunks=_sse(body["model"], text, usage if include else None), content_type="text/event-stream"
            )
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        return Reply(json={**_head(body["model"], "chat.completion"), "choices": [choice], "usage": usage})

    def _embeddings(self, request: Recorded) -> Reply:
        body = request.body
        if (problem := self.unknown_model(body)) is not None:
            return problem
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        dimension = body.get("dimensions") or self.dimension
        data = [
            {"object": "embedding", "index": i, "embedding": _encode(fake_embedding(t, dimension), body)}
            for i, t in enumerate(texts)
        ]
        tokens = count_tokens(*texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return Reply(json={"object": "list", "data": data, "model": body["model"], "usage": usage})

    def _models(self, request: Recorded) -> Reply:
        names = sorted(self.models or {"fake-chat", "text-embedding-3-small"})
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "loopback"} for n in names]
        return Reply(json={"object": "list", "data": data})


def _head(model: str, obj: str) -> dict[str, Any]:
    return {"id": "chatcmpl-loopback", "object": obj, "created": int(time.time()), "model": model}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _sse(model: str, text: str, usage: dict[str, int] | None) -> Iterator[bytes]:
    head = _head(model, "chat.completion.chunk")
    first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    events = [{**head, "choices": [first]}]
    events += [
        {**head, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
        for p in pieces(text)
    ]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage is not None:
        events.append({**head, "choices": [], "usage": usage})
    for event in events:
        yield b"data: " + json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n\n"
    yield b"data: [DONE]\n\n"


def _encode(row: list[float], body: dict[str, Any]) -> Any:
    if body.get("encoding_format") == "base64":
        return base64.b64encode(np.asarray(row, dtype="<f4").tobytes()).decode("ascii")
    return row


def shared_server() -> OpenAIServer:
    """The process's server for the contract suite (key ``TEST_KEY``)."""
    return OpenAIServer.shared(api_key=TEST_KEY)


def chat_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """``openai`` LLM options for ragkit's contract run: the loopback server."""
    return {"base_url": shared_server().url, "api_key": TEST_KEY, "model": "fake-chat", "max_retries": 1}


def embedder_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """``openai`` embedder options for ragkit's contract run: the loopback server."""
    return {
        "base_url": shared_server().url,
        "api_key": TEST_KEY,
        "model": "text-embedding-3-small",
        "dimensions": 64,
        "batch_size": 16,
        "max_retries": 1,
    }


CONTRACT_OPTIONS = {"llm:openai": chat_options, "embedder:openai": embedder_options}
"""What ragkit's contract run tests the adapters with (the ``ragkit.testing`` entry point)."""
