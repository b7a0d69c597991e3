"""The Ollama-compatible routes through the official ``ollama`` client (and
raw NDJSON over httpx for what the client drops), on a real uvicorn server
over a real indexed workspace: version, tags, show, chat and generate plain
and streamed, mode by model name and by ``/mode`` prefix, references in the
text and in the last line's ``references``, errors in Ollama's shape.

Troubleshooting: the server is ``chat_support.chat_server``; a failure that
shows a 500 has its traceback in the captured log of the uvicorn thread."""

from __future__ import annotations

import json

import httpx
import ollama
import pytest
from chat_support import FAIL, QUESTION, SECRET, TOKEN, chat_server  # noqa: F401 (the fixture)

from ragkit.server.chat.ollama_api import OLLAMA_VERSION
from ragkit.server.chat.turns import model_names

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def client(chat_server) -> ollama.Client:  # noqa: F811
    return ollama.Client(host=chat_server.workspace_url, headers=AUTH)


def chat(client: ollama.Client, text: str, model: str = "ragkit:mix", **kwargs):
    return client.chat(model=model, messages=[{"role": "user", "content": text}], **kwargs)


def test_version_tags_show_ps(client, chat_server):  # noqa: F811
    version = httpx.get(f"{chat_server.workspace_url}/api/version", headers=AUTH)
    assert version.status_code == 200 and version.json() == {"version": OLLAMA_VERSION}
    listed = client.list().models
    assert [m.model for m in listed] == model_names()
    assert all(m.details.family == "ragkit" and len(m.digest) == 64 for m in listed)
    shown = client.show("ragkit:ppr")
    assert shown.modelinfo["ragkit.mode"] == "ppr" and "PageRank" in shown.modelfile
    assert client.ps().models == []


def test_chat_answers_with_references(client):
    reply = chat(client, QUESTION, stream=False)
    assert (reply.model, reply.done, reply.done_reason) == ("ragkit:mix", True, "stop")
    assert reply.message.role == "assistant" and "Haijia" in reply.message.content
    assert "### References\n\n- [1] " in reply.message.content
    assert reply.eval_count > 0 and reply.prompt_eval_count > 0
    assert reply.total_duration >= reply.eval_duration >= 0 and reply.total_duration > 0


def test_streamed_chat_is_the_same_answer(client):
    whole = chat(client, QUESTION, stream=False)
    parts = list(chat(client, QUESTION, stream=True))
    assert len(parts) > 5 and not any(p.done for p in parts[:-1])
    last = parts[-1]
    assert (last.done, last.done_reason, last.message.content) == (True, "stop", "")
    assert "".join(p.message.content for p in parts) == whole.message.content


def test_generate_plain_and_streamed(client):
    whole = client.generate(model="ragkit:local", prompt=QUESTION, system="Answer briefly.", stream=False)
    assert (whole.model, whole.done, whole.done_reason) == ("ragkit:local", True, "stop")
    assert "### References" in whole.response
    parts = list(client.generate(model="ragkit:local", prompt=QUESTION, system="Answer briefly.", stream=True))
    assert parts[-1].done and "".join(p.response for p in parts) == whole.response
    chatted = chat(client, QUESTION, model="ragkit:local", stream=False)
    assert chatted.message.content == whole.response  # the offline LLM ignores instructions; same retrieval


@pytest.mark.parametrize("mode", ["naive", "local", "hybrid", "ppr"])
def test_mode_by_model_name_or_prefix_is_the_mode_run(client, mode):
    by_name = chat(client, QUESTION, model=f"ragkit:{mode}", stream=False)
    by_prefix = chat(client, f"/{mode} {QUESTION}", model="ragkit:mix", stream=False)
    assert by_name.model == by_prefix.model == f"ragkit:{mode}"  # the mode the engine reports it ran
    assert by_prefix.message.content == by_name.message.content  # same mode, prefix stripped
    streamed = list(client.generate(model="ragkit:mix", prompt=f"/{mode} {QUESTION}", stream=True))
    assert {p.model for p in streamed} == {f"ragkit:{mode}"}
    assert "".join(p.response for p in streamed) == by_name.message.content


def test_history_and_system_prompt_reach_the_answer_call(client, chat_server):  # noqa: F811
    reply = client.chat(model="ragkit:naive", stream=False, messages=[
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "/local Who is Gu Yao?"},
        {"role": "assistant", "content": "Gu Yao leads Project Haijia [1]."},
        {"role": "user", "content": QUESTION},
    ])
    assert reply.model == "ragkit:naive" and "### References" in reply.message.content
    request = chat_server.llm.answers[-1]
    assert request.prompt == QUESTION and "Answer in one line." in request.system
    assert [(m.role, m.content) for m in request.history] == [
        ("user", "Who is Gu Yao?"), ("assistant", "Gu Yao leads Project Haijia [1].")]


def test_model_failure_is_an_error_without_secrets(client):
    with pytest.raises(ollama.ResponseError) as err:
        chat(client, f"{FAIL} {QUESTION}", stream=False)
    assert err.value.status_code == 502 and "the model failed" in err.value.error and SECRET not in err.value.error
    with pytest.raises(ollama.ResponseError) as err:  # headers were sent: the error is an NDJSON line
        list(client.generate(model="ragkit:mix", prompt=f"{FAIL} {QUESTION}", stream=True))
    assert "the model failed" in err.value.error and SECRET not in err.value.error


def test_ndjson_last_line_has_structured_references(chat_server):  # noqa: F811
    body = {"model": "ragkit:mix", "messages": [{"role": "user", "content": QUESTION}]}  # stream: Ollama's default
    with httpx.stream("POST", f"{chat_server.workspace_url}/api/chat", json=body, headers=AUTH, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in r.iter_lines() if line]
    last = lines[-1]
    assert last["done"] and all(not line["done"] for line in lines[:-1])
    text = "".join(line["message"]["content"] for line in lines)
    assert last["references"]
    for ref in last["references"]:
        assert f"- [{ref['number']}] {ref['file_path']}" in text
    plain = httpx.post(f"{chat_server.workspace_url}/api/chat", json={**body, "stream": False}, headers=AUTH, timeout=60)
    assert plain.json()["references"] == last["references"]


def test_empty_conversation_loads_the_model(client):
    assert client.chat(model="ragkit:mix", messages=[], stream=False).done_reason == "load"
    assert client.generate(model="ragkit:mix", prompt="", stream=False).done_reason == "load"


def test_unknown_model_is_404_naming_the_models(client):
    for call in (lambda: chat(client, QUESTION, model="llama3"), lambda: client.show("llama3"),
                 lambda: client.generate(model="llama3", prompt="")):
        with pytest.raises(ollama.ResponseError) as err:
            call()
        assert err.value.status_code == 404 and "ragkit:mix" in err.value.error


@pytest.mark.parametrize("content, status, words", [
    ("/lokal who?", 400, "unknown mode prefix"),
    ("x" * 4001, 413, "max_message_chars=4000"),
])
def test_bad_requests_get_ollama_errors(client, content, status, words):
    for stream in (False, True):
        with pytest.raises(ollama.ResponseError) as err:
            result = chat(client, content, stream=stream)
            list(result) if stream else None
        assert err.value.status_code == status and words in err.value.error


def test_invalid_body_names_the_field(chat_server):  # noqa: F811
    r = httpx.post(f"{chat_server.url}/api/chat", json={"model": "ragkit:mix", "messages": [{"role": "x"}]},
                   headers=AUTH)
    assert r.status_code == 400 and "messages.0.role" in r.json()["error"]
    assert list(r.json()) == ["error"]
    form = httpx.post(f"{chat_server.url}/api/chat", content=b'{"model": "ragkit:mix"}', headers=AUTH)
    assert form.status_code == 400 and "Content-Type: application/json" in form.json()["error"]


def test_wrong_key_is_refused(chat_server):  # noqa: F811
    bad = ollama.Client(host=chat_server.url, headers={"Authorization": "Bearer nope-nope-nope"})
    with pytest.raises(ollama.ResponseError) as err:
        bad.list()
    assert err.value.status_code == 401 and "nope-nope-nope" not in err.value.error
