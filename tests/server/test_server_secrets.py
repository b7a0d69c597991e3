"""A model server's error reaches no client: not the key it echoes, in any
encoding, not its URL, not its words; the server log gets the detail, scrubbed.

A real ``ragkit serve`` runs the real ``openai`` LLM and embedder against a
loopback model server that refuses them (HTTP 401) with a message echoing the
request's key as is, %-encoded, in base64 (alone, URL-safe, as Basic auth) and
JSON-escaped, and naming its own URL. A read key then asks every route that
calls a model (query, its stream, both chat protocols, streamed or not,
``/ready``); a write key ingests one text the LLM refuses (a failed document,
listed to readers) and one the embedder refuses (a failed job). Each route's
bodies are checked by a test of their own, so a failure names the route.

Troubleshoot: a leak names the form found and the body it was found in. A form
of the key: ``ragkit.redact`` misses that encoding. The URL or the server's
words: the route shows ``str(error)`` instead of ``public_message(error)``
(``ragkit.errors``).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest

from server_support import Keys, Server, client, make_keys
from ragkit.testing.http_server import Recorded, Reply

KEY = "zq81/Pl+V=7f3a9c"
"""The model key: no known shape, and / + = which every encoding writes otherwise."""
UPSTREAM_WORDS = "upstream says no"


def forms(key: str) -> dict[str, str]:
    """``key`` as model servers write it back, by name."""
    return {
        "as is": key,
        "quote": quote(key, safe=""),
        "quote, slash kept": quote(key),
        "lower-case hex": re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(key, safe="")),
        "JSON, escaped slash": json.dumps(key)[1:-1].replace("/", "\\/"),
        "JSON, \\u escapes": key.replace("/", "\\u002f").replace("+", "\\u002B"),
        "base64": base64.b64encode(key.encode()).decode(),
        "base64 URL-safe unpadded": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "Basic auth": base64.b64encode(f"apikey:{key}".encode()).decode(),
    }


FORMS = forms(KEY)


def _openai_server() -> type:
    return pytest.importorskip("ragkit_openai.testing").OpenAIServer


class EchoingModelServer(_openai_server()):  # type: ignore[misc]
    """An OpenAI-compatible server: the routes in ``failing`` refuse with a 401
    echoing the credentials and the server's URL; chat otherwise answers an
    empty extraction (so a text is extracted, then embedded)."""

    def __init__(self) -> None:
        super().__init__("/v1", api_key=KEY)
        self.failing: set[str] = set()

    def _reply(self, request: Recorded) -> Reply:
        route = request.path.removeprefix(self.prefix)
        if route in self.failing:
            key = request.headers.get("authorization", "").removeprefix("Bearer ")
            return self.error_reply(401, f"{echo(key)} (at {self.url}{route})")
        if route == "/chat/completions" and not (request.body or {}).get("stream"):
            return self._empty_extraction(request)
        return super()._reply(request)

    def _empty_extraction(self, request: Recorded) -> Reply:
        choice = {"index": 0, "message": {"role": "assistant", "content": "<|COMPLETE|>"}, "finish_reason": "stop"}
        return Reply(json={"id": "x", "object": "chat.completion", "created": 0, "model": request.body["model"],
                           "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                                          "total_tokens": 2}})


def echo(key: str) -> str:
    """The model server's words: the request's key in every form."""
    return f"{UPSTREAM_WORDS}: credentials " + " | ".join(forms(key).values())


def _model_env(url: str) -> dict[str, str | None]:
    common = {"BASE_URL": url, "API_KEY": KEY, "MAX_RETRIES": "0", "TIMEOUT": "20"}
    env: dict[str, str | None] = {"RAGKIT_LLM": "openai", "RAGKIT_LLM__MODEL": "fake-chat", "RAGKIT_LLM__DELAY": None,
                                  "RAGKIT_EMBEDDER": "openai", "RAGKIT_EMBEDDER__MODEL": "text-embedding-3-small",
                                  "RAGKIT_EMBEDDER__DIMENSIONS": "32"}
    for name, value in common.items():
        env[f"RAGKIT_LLM__{name}"] = env[f"RAGKIT_EMBEDDER__{name}"] = value
    return env


ASK = {"question": "Who met Bob?", "mode": "bypass"}
CHAT = {"model": "ragkit:bypass", "messages": [{"role": "user", "content": "Who met Bob?"}]}


def _reads(c: httpx.Client) -> dict[str, str]:
    """Every route a read key may ask that calls a model, as ``name -> body``."""
    return {
        "query": c.post("/w/alpha/query", json=ASK).text,
        "query, default mode": c.post("/w/alpha/query", json={"question": "Who met Bob?"}).text,
        "query/stream": c.post("/w/alpha/query/stream", json=ASK).text,
        "openai chat": c.post("/w/alpha/v1/chat/completions", json=CHAT).text,
        "openai chat, streamed": c.post("/w/alpha/v1/chat/completions", json={**CHAT, "stream": True}).text,
        "ollama chat": c.post("/w/alpha/api/chat", json={**CHAT, "stream": False}).text,
        "ollama chat, streamed": c.post("/w/alpha/api/chat", json={**CHAT, "stream": True}).text,
        "ready": c.get("/ready").text,
    }


def _ingest(c: httpx.Client, text: str) -> tuple[dict, dict[str, str]]:
    """Insert ``text``, wait for its job; the job as the writer sees it, and its bodies."""
    url = c.post("/w/alpha/documents/texts", json={"texts": [text]}).json()["url"]
    deadline = time.monotonic() + 60
    while (job := c.get(url).json())["state"] not in ("done", "failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    return job, {"job": c.get(url).text, "job events": c.get(url + "/events").text}


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """What every route answered, and the server's log."""
    working_dir = tmp_path_factory.mktemp("secrets") / "data"
    working_dir.mkdir()
    keys: Keys = make_keys(working_dir)
    with EchoingModelServer() as model:
        with Server(working_dir).start(extra_env=_model_env(model.url)) as server:
            model.failing = {"/chat/completions", "/embeddings"}
            with client(server, keys.reader) as reader, client(server, keys.writer) as writer:
                bodies = _reads(reader)
                failed_document, document_bodies = _ingest(writer, "Alice met Bob in Paris.")
                bodies |= {f"{k}, failed document": v for k, v in document_bodies.items()}
                # Read before the next job, which retries the failed document.
                bodies["documents"] = reader.get("/w/alpha/documents").text
                doc_id = next(iter(failed_document["failed"]))
                bodies["document"] = reader.get(f"/w/alpha/documents/{doc_id}").text
                model.failing = {"/embeddings"}  # extraction works; the chunks' vectors do not
                failed_job, job_bodies = _ingest(writer, "Carol met Dan in Rome.")
                bodies |= {f"{k}, failed job": v for k, v in job_bodies.items()}
            echoed = [r for r in model.requests if r.status == 401]
        yield {"bodies": bodies, "log": server.log_text(), "model_host": f"127.0.0.1:{model.port}",
               "echoed": echoed, "failed_document": failed_document, "failed_job": failed_job}


ROUTES = [
    "query", "query, default mode", "query/stream", "openai chat", "openai chat, streamed", "ollama chat",
    "ollama chat, streamed", "ready", "job, failed document", "job events, failed document", "documents",
    "document", "job, failed job", "job events, failed job",
]


def test_the_model_server_was_asked_and_echoed_the_key(seen):
    """The premise: each failure went through the real client and was echoed,
    short enough that ragkit keeps every form (it cuts the server's words at
    300 characters, after redacting them)."""
    assert len(set(FORMS.values())) == len(FORMS) and len(echo(KEY)) < 290
    assert seen["echoed"] and all(r.headers["authorization"] == f"Bearer {KEY}" for r in seen["echoed"])
    assert seen["failed_document"]["state"] == "done" and len(seen["failed_document"]["failed"]) == 1
    assert seen["failed_job"]["state"] == "failed" and seen["failed_job"]["error"]


def _as_read(body: str) -> str:
    """The body, then every string in the JSON documents it holds (a JSON
    body, NDJSON lines, SSE ``data:`` lines) as a client reads them: a form
    with a backslash is escaped again in the raw body."""
    strings: list[str] = []
    for line in body.splitlines():
        try:
            _strings(json.loads(line.removeprefix("data: ")), strings)
        except ValueError:
            continue
    return "\n".join([body, *strings])


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


@pytest.mark.parametrize("route", ROUTES)
def test_a_client_sees_the_cause_not_the_key_the_url_or_the_servers_words(seen, route):
    body = _as_read(seen["bodies"][route])
    shown = [f"the key ({name})" for name, form in FORMS.items() if form in body]
    if seen["model_host"] in body:
        shown.append("the model server's address")
    if UPSTREAM_WORDS in body:
        shown.append("the model server's words")
    assert not shown, f"{route} shows {'; '.join(shown)}: {body}"
    assert "HTTP 401" in body, f"{route} does not say what failed: {body}"


def test_the_server_log_has_the_detail_but_no_form_of_the_key(seen):
    log = seen["log"]
    leaks = [name for name, form in FORMS.items() if form in log]
    assert not leaks, f"the server log shows the key ({', '.join(leaks)}):\n{log}"
    assert UPSTREAM_WORDS in log and seen["model_host"] in log, "the log keeps the detail for the operator"
    assert "refused the credentials (HTTP 401" in log
