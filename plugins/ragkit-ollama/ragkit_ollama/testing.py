"""``OllamaServer``: a loopback server speaking Ollama's REST API, for tests
with the real ``ollama`` client (see ``ragkit.testing.http_server``).

- ``POST {prefix}/api/chat``: JSON, or NDJSON lines when ``stream`` is true
  (Ollama's default), the last one with ``done`` and the token counts;
  answers from ``fake_answer`` (JSON for ``format``, ``options.num_predict``
  words at most);
- ``POST {prefix}/api/embed``: ``fake_embedding`` rows;
- ``GET {prefix}/api/version`` and ``{prefix}/api/tags``.

``think_tags=True`` imitates a server that puts ``<think>...</think>`` in the
answer whatever ``think`` says; with ``"think": true`` the server also fills
``message.thinking``, as Ollama does for reasoning models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

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

THINKING = "<think>The user wants a short answer; let me think.</think>\n\n"


class OllamaServer(LoopbackServer):
    def __init__(
        self,
        prefix: str = "",
        *,
        dimension: int = 32,
        think_tags: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(prefix, **kwargs)
        self.dimension = dimension
        self.think_tags = think_tags

    def routes(self) -> Mapping[tuple[str, str], Route]:
        return {
            ("POST", "/api/chat"): self._chat,
            ("POST", "/api/embed"): self._embed,
            ("GET", "/api/version"): lambda r: Reply(json={"version": "0.12.6"}),
            ("GET", "/api/tags"): self._tags,
        }

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(status, json={"error": message})

    def not_found_message(self, model: str) -> str:
        return f'model "{model}" not found, try pulling it first'

    def _chat(self, request: Recorded) -> Reply:
        body = request.body
        if (problem := self.unknown_model(body)) is not None:
            return problem
        options = body.get("options") or {}
        answer = fake_answer(
            body["messages"], json_mode=bool(body.get("format")), max_tokens=options.get("num_predict")
        )
        text = THINKING + answer if self.think_tags else answer
        counts = {
            "prompt_eval_count": count_tokens(*(m.get("content") or "" for m in body["messages"])),
            "eval_count": count_tokens(text),
        }
        thinking = "Thinking it over." if body.get("think") is True else None
        if body.get("stream", True):
            return Reply(
                chunks=_ndjson(body["model"], text, thinking, counts), content_type="application/x-ndjson"
            )
        message = {"role": "assistant", "content": text, **({"thinking": thinking} if thinking else {})}
        return Reply(json={**_head(body["model"]), "message": message, **_done(counts)})

    def _embed(self, request: Recorded) -> Reply:
        body = request.body
        if (problem := self.unknown_model(body)) is not None:
            return problem
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        rows = [fake_embedding(t, self.dimension) for t in texts]
        reply = {"model": body["model"], "embeddings": rows, "total_duration": 1, "load_duration": 0}
        return Reply(json={**reply, "prompt_eval_count": count_tokens(*texts)})

    def _tags(self, request: Recorded) -> Reply:
        names = sorted(self.models or {"fake-chat", "fake-embed"})
        return Reply(json={"models": [{"name": n, "model": n, "size": 0, "digest": "0"} for n in names]})


def _head(model: str) -> dict[str, Any]:
    return {"model": model, "created_at": datetime.now(UTC).isoformat()}


def _done(counts: dict[str, int]) -> dict[str, Any]:
    return {
        "done": True,
        "done_reason": "stop",
        "total_duration": 1,
        "load_duration": 0,
        **counts,
        "eval_duration": 1,
    }


def _ndjson(model: str, text: str, thinking: str | None, counts: dict[str, int]) -> Iterator[bytes]:
    lines = []
    if thinking:
        lines.append(
            {
                **_head(model),
                "message": {"role": "assistant", "content": "", "thinking": thinking},
                "done": False,
            }
        )
    lines += [
        {**_head(model), "message": {"role": "assistant", "content": p}, "done": False} for p in pieces(text)
    ]
    lines.append({**_head(model), "message": {"role": "assistant", "content": ""}, **_done(counts)})
    for line in lines:
        yield json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"


def shared_server() -> OllamaServer:
    """The process's server for the contract suite."""
    return OllamaServer.shared()


def chat_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """``ollama`` LLM options for ragkit's contract run: the loopback server."""
    return {"base_url": shared_server().url, "model": "fake-chat", "think": False, "max_retries": 1}


def embedder_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """``ollama`` embedder options for ragkit's contract run: the loopback server."""
    return {"base_url": shared_server().url, "model": "fake-embed", "dimensions": 32, "max_retries": 1}


CONTRACT_OPTIONS = {"llm:ollama": chat_options, "embedder:ollama": embedder_options}
"""What ragkit's contract run tests the adapters with (the ``ragkit.testing`` entry point)."""
