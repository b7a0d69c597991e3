"""Credentials never reach error text, which is logged and shown to clients.

First the rules of ``ragkit.redact.redact`` on strings; then the real
``openai`` and ``ollama`` clients against loopback servers whose error bodies
echo every request header (Authorization included), directly and through
``ragkit doctor`` / ``index`` / ``query`` in a subprocess: neither their output
nor the stored document status may hold the key (the stored status holds only
the cause: readers of the workspace see it).

Troubleshoot: a leak names the text it was found in; the server's recorded
requests (``server.requests``) show which header carried the key.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from ragkit import redact as redact_mod
from ragkit.errors import ModelError
from ragkit.protocols.models import ChatRequest
from ragkit.redact import MASK, redact, register_secret
from ragkit.testing.http_server import Recorded, Reply
from ragkit.testing.process_state import registered_secrets_isolated

def plugin_testing(name: str):
    """A model plugin's test servers; only the tests through the real clients need one,
    so the rule tests run whatever is installed."""
    return pytest.importorskip(f"{name}.testing")

KEY = "sk-live-7f3a9c1e5b2d4f6a8c0e"  # shaped like an OpenAI key
PLAIN_KEY = "zq81-plain-secret-value"  # no known shape: only its value or position gives it away
RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


# -- the rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("HTTP 401: headers {'authorization': 'Bearer %s', 'x-api-key': '%s'}", "'authorization': 'Bearer ****'"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw== was refused", "Authorization: Basic **** was refused"),
        ("cannot connect to https://bob:%s@proxy.example:8443/v1", "https://****@proxy.example:8443/v1"),
        ('{"api_key": "%s", "max_tokens": 500}', '{"api_key": "****", "max_tokens": 500}'),
        ("GET /v1/models?api-key=%s&x=1 failed", "GET /v1/models?api-key=****&x=1 failed"),
        ("token refused: Bearer %s.", "token refused: Bearer ****."),
        ("password=%s; retry", "password=****; retry"),
    ],
)
def test_credentials_are_masked_by_position(text, kept):
    text = text.replace("%s", PLAIN_KEY)
    out = redact(text)
    assert PLAIN_KEY not in out and kept in out, out


def test_known_key_shapes_are_masked_anywhere():
    shapes = [KEY, "sk-ant-api03-" + "x" * 30, "hf_" + "a" * 34, "ghp_" + "b" * 36, "AKIAIOSFODNN7EXAMPLE"]
    out = redact("Incorrect API key provided: " + ", ".join(shapes) + ".")
    assert not any(s in out for s in shapes) and out.startswith("Incorrect API key provided: ****")


def test_known_values_from_the_caller_the_registry_the_environment_and_the_request(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "env-token-123456")
    monkeypatch.setenv("SOME_PROXY_URL", "http://carol:url-pass-9876@proxy:3128")
    with registered_secrets_isolated():
        register_secret("registered-secret-42")
        text = "echo: env-token-123456 / url-pass-9876 / registered-secret-42 / given-secret-77"
        assert redact(text, secrets=["given-secret-77"]) == f"echo: {MASK} / {MASK} / {MASK} / {MASK}"

    class Request:  # what httpx and openai attach to their exceptions
        headers = {"authorization": f"Bearer {PLAIN_KEY}"}
        url = "http://127.0.0.1:9/v1/chat/completions"

    error = RuntimeError("boom")
    error.request = Request()  # type: ignore[attr-defined]
    wrapped = ValueError("wrapped")
    wrapped.__cause__ = error
    assert redact(f"server said: unknown key {PLAIN_KEY}", exc=wrapped) == f"server said: unknown key {MASK}"


def test_basic_auth_from_a_url_is_masked_encoded_too(monkeypatch):
    monkeypatch.setenv("RAGKIT_LLM__BASE_URL", "http://user:pw-longer-than-8@127.0.0.1:1/v1")
    encoded = base64.b64encode(b"user:pw-longer-than-8").decode()
    assert redact(f"echoed {encoded} back") == f"echoed {MASK} back"


def test_ordinary_text_is_left_alone():
    text = (
        "the bearer of bad news; Bearer tokens expire; a basic question; max_tokens=500; "
        "see https://api.openai.com/v1 and user@example.com; the password is wrong"
    )
    assert redact(text) == text
    assert redact("") == ""


def test_short_secret_values_are_not_searched_for_as_words(monkeypatch):
    monkeypatch.setenv("TINY_API_KEY", "the")  # would blank out every "the"
    assert redact("the model answered") == "the model answered"


def test_redact_is_idempotent():
    once = redact(f"Authorization: Bearer {KEY} at http://u:{PLAIN_KEY}@h/")
    assert redact(once) == once and KEY not in once and PLAIN_KEY not in once


# -- a known secret in other encodings ----------------------------------------------------

ODD = "zq81/plain+secret=välue 7f3a"
"""A secret with what every encoding writes otherwise: / + = a space and a non-ASCII letter."""


def _b64(text: str, *, urlsafe: bool = False, pad: bool = True) -> str:
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()
    return encoded if pad else encoded.rstrip("=")


ENCODED = {
    "quote": quote(ODD),
    "quote, nothing safe": quote(ODD, safe=""),
    "quote_plus": quote_plus(ODD),
    "lower-case hex": re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(ODD, safe="")),
    "%-encoded twice": quote(quote(ODD, safe=""), safe=""),
    "JSON": json.dumps(ODD)[1:-1],
    "JSON, slash and upper-case hex escaped": json.dumps(ODD)[1:-1].replace("/", "\\/").replace("e4", "E4"),
    "JSON, every character escaped": "".join(f"\\u{ord(c):04x}" for c in ODD),
    "JSON in JSON": json.dumps(json.dumps(ODD)[1:-1])[1:-1],
    "%-encoded in JSON": json.dumps(quote_plus(ODD))[1:-1],
    "JSON in a URL": quote(json.dumps(ODD)[1:-1], safe=""),
    "base64": _b64(ODD),
    "base64 unpadded": _b64(ODD, pad=False),
    "base64 URL-safe": _b64(ODD, urlsafe=True),
    "base64 URL-safe unpadded": _b64(ODD, urlsafe=True, pad=False),
    "base64 in a URL": quote(_b64(ODD), safe=""),
    "base64 in JSON with escaped slashes": _b64(ODD).replace("/", "\\/"),
}


@pytest.mark.parametrize("form", ENCODED.values(), ids=ENCODED.keys())
@pytest.mark.parametrize("known", ["given", "registered", "environment", "request"])
def test_a_known_secret_is_masked_in_every_encoding(form, known, monkeypatch):
    """Troubleshoot: the form that leaked is in the test id; ``_char_forms``
    (spelled out) or ``_base64_cores`` (base64) should cover it."""
    assert form != ODD and ODD not in form
    text = f"upstream said: bad credentials {form}, try again"
    expected = f"upstream said: bad credentials {MASK}, try again"
    if known == "given":
        assert redact(text, secrets=[ODD]) == expected
    elif known == "registered":
        with registered_secrets_isolated():
            register_secret(ODD)
            assert redact(text) == expected
    elif known == "environment":
        monkeypatch.setenv("UPSTREAM_API_KEY", ODD)
        assert redact(text) == expected
    else:
        assert redact(text, exc=_failed_request({"x-api-key": ODD})) == expected


def _failed_request(headers: dict[str, str]) -> Exception:
    class Request:  # what httpx and openai attach to their exceptions
        url = "http://127.0.0.1:9/v1/chat/completions"

    Request.headers = headers  # type: ignore[attr-defined]
    error = RuntimeError("HTTP 401")
    error.request = Request()  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize("before", ["", "u", "us", "user:", "apikey:"])
@pytest.mark.parametrize("after", ["", "x", "xy", "\n"])
@pytest.mark.parametrize("urlsafe", [False, True])
def test_a_secret_inside_a_longer_base64_text_is_masked_whatever_its_alignment(before, after, urlsafe):
    """Basic auth's ``base64(user:secret)`` with any user, and any other text
    holding the secret: what is left decodes to no more than two of its bytes."""
    encoded = _b64(before + ODD + after, urlsafe=urlsafe)
    out = redact(f"Authorisation was Basic {encoded} here", secrets=[ODD])
    assert encoded not in out and MASK in out, out
    kept = out.removeprefix("Authorisation was Basic ").removesuffix(" here").replace(MASK, "")
    assert len(kept) <= len(_b64(before)) + len(_b64(after)) + 2, out


def test_characters_beyond_the_bmp_and_escaped_quotes():
    secret = 'emoji-😀-and-"quoted"'
    for form in (json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], quote(secret, safe="")):
        assert redact(f"[{form}]", secrets=[secret]) == f"[{MASK}]", form


def test_ordinary_text_and_other_encodings_are_left_alone():
    """Encoded text that does not spell the secret, and the secret's words
    apart, stay as they are (the forms match the whole secret, never a part)."""
    secret = "correct-horse-battery"
    CAFE = "café /path?a=b c"
    text = (
        "a correct horse; battery low; correct%2Dhorse; correct-horse-batter; "
        f"{_b64('correct-horse')} {quote(CAFE, safe='')} \\u00e9\\/ "
        f"{_b64(secret[:-1])} {_b64(secret)[:12]} the password is wrong"
    )
    assert redact(text, secrets=[secret]) == text


def test_the_pattern_for_a_set_of_secrets_is_built_once():
    redact("warm up", secrets=["cached-secret-123"])
    # The private helper's own cache is what this test is about: no public surface shows it.
    before = redact_mod._pattern.cache_info()
    for _ in range(3):
        redact("an error", secrets=["cached-secret-123"])
    after = redact_mod._pattern.cache_info()
    assert after.misses == before.misses and after.hits >= before.hits + 3


# -- real clients against servers that echo the request's headers -------------------------


def echoing(server_class: type, status: int) -> type:
    """A loopback server that answers every request with ``status`` and an
    error message quoting all the request's headers (as some proxies do)."""

    class Echoing(server_class):  # type: ignore[misc, valid-type]
        def _reply(self, request: Recorded) -> Reply:
            return self.error_reply(status, f"rejected {request.method} {request.path} with headers {request.headers}")

    return Echoing


NO_RETRY = {"max_retries": 0}


@pytest.mark.parametrize("status", [401, 500])
async def test_openai_client_errors_hold_no_key(status):
    from ragkit_openai import OpenAIChat, OpenAIEmbedder

    with echoing(plugin_testing("ragkit_openai").OpenAIServer, status)() as server:
        options = {"base_url": server.url, "api_key": PLAIN_KEY, **NO_RETRY}
        chat = OpenAIChat({**options, "model": "fake-chat"})
        with pytest.raises(ModelError) as chat_error:
            await chat.complete(ChatRequest(prompt="hi"))
        embedder = OpenAIEmbedder({**options, "model": "e", "dimensions": 8})
        with pytest.raises(ModelError) as embed_error:
            await embedder.embed(["hi"])
        assert server.requests[0].headers["authorization"] == f"Bearer {PLAIN_KEY}"  # the echo did happen
    for error in (chat_error.value, embed_error.value):
        assert "rejected POST" in str(error) and PLAIN_KEY not in str(error), str(error)


async def test_a_streamed_answer_that_fails_holds_no_key():
    from ragkit_openai import OpenAIChat

    with echoing(plugin_testing("ragkit_openai").OpenAIServer, 401)() as server:
        chat = OpenAIChat({"base_url": server.url, "api_key": PLAIN_KEY, "model": "fake-chat", **NO_RETRY})
        with pytest.raises(ModelError) as error:
            async for _ in chat.stream(ChatRequest(prompt="hi")):
                pass
    assert "rejected POST" in str(error.value) and PLAIN_KEY not in str(error.value)


@pytest.mark.parametrize("status", [401, 500])
async def test_ollama_client_errors_hold_no_key(status):
    from ragkit_ollama import OllamaChat, OllamaEmbedder

    with echoing(plugin_testing("ragkit_ollama").OllamaServer, status)() as server:
        options = {"base_url": server.url, "api_key": PLAIN_KEY, **NO_RETRY}
        with pytest.raises(ModelError) as chat_error:
            await OllamaChat({**options, "model": "fake-chat"}).complete(ChatRequest(prompt="hi"))
        with pytest.raises(ModelError) as embed_error:
            await OllamaEmbedder({**options, "model": "fake-embed", "dimensions": 8}).embed(["hi"])
        assert server.requests[0].headers["authorization"] == f"Bearer {PLAIN_KEY}"
    for error in (chat_error.value, embed_error.value):
        assert "rejected POST" in str(error) and PLAIN_KEY not in str(error), str(error)


# -- the CLI: printed and stored ---------------------------------------------------------


def _run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _leaks(text: str, *secrets: str) -> list[str]:
    encoded = base64.b64encode(f"user:{PLAIN_KEY}".encode()).decode()
    return [s for s in (*secrets, encoded) if s in text]


@pytest.mark.parametrize("where", ["file", "env", "url"])
def test_doctor_index_and_query_print_and_store_no_key(tmp_path, where):
    """The key in ragkit.toml (found only in the failed request), in the
    environment, or as base_url's ``user:key@``; the server echoes it back."""
    from ragkit.rag import RAG
    from ragkit.settings import load_settings

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") and not k.endswith("_API_KEY")}
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Alice met Bob in Paris. Bob works for Acme.")
    with echoing(plugin_testing("ragkit_openai").OpenAIServer, 500)() as server:
        url = server.url.replace("://", f"://user:{PLAIN_KEY}@") if where == "url" else server.url
        lines = [f'working_dir = "{tmp_path / "data"}"', "[llm]", 'name = "openai"', "[llm.options]", 'model = "fake-chat"', f'base_url = "{url}"',
                 "max_retries = 0"]
        if where == "file":
            lines.append(f'api_key = "{PLAIN_KEY}"')
        elif where == "env":
            env["RAGKIT_LLM__API_KEY"] = PLAIN_KEY
        (tmp_path / "ragkit.toml").write_text("\n".join(lines) + "\n")

        doctor = _run("doctor", cwd=tmp_path, env=env)
        index = _run("index", "docs", cwd=tmp_path, env=env)
        query = _run("query", "Who is Alice?", cwd=tmp_path, env=env)
        seen = [r.headers.get("authorization", "") for r in server.requests]
    assert seen and all(PLAIN_KEY in h or "Basic" in h for h in seen), seen  # the key was sent, and echoed
    assert doctor.returncode == 1 and "rejected POST" in doctor.stdout, doctor.stdout + doctor.stderr
    assert index.returncode == 1 and "failed: ModelError" in index.stdout, index.stdout + index.stderr
    assert "rejected POST" in index.stdout, "the CLI's user gets the server's own words"
    assert query.returncode == 2 and "rejected POST" in query.stderr, query.stdout + query.stderr
    for name, run in (("doctor", doctor), ("index", index), ("query", query)):
        assert not _leaks(run.stdout + run.stderr, PLAIN_KEY), f"{name} printed the key:\n{run.stdout}{run.stderr}"

    async def stored_errors() -> list[str]:
        async with RAG(load_settings(tmp_path / "ragkit.toml", env={}).settings) as rag:
            page = await rag.stores.doc_status.list_page(None, 100, None)
            return [r.error or "" for r in page.items]

    errors = asyncio.run(stored_errors())
    # Stored errors are shown to every reader of the workspace: the cause only.
    assert errors and all("HTTP 500" in e and "rejected POST" not in e for e in errors), errors
    assert not any(_leaks(e, PLAIN_KEY, "127.0.0.1") for e in errors), errors
