"""The OpenAI-compatible routes through the official ``openai`` client, on a
real uvicorn server over a real indexed workspace: models, completions plain
and streamed (SSE), mode by model name and by ``/mode`` prefix, references in
the text and in the structured ``references`` field, errors in OpenAI's shape.

Troubleshooting: the server is ``chat_support.chat_server``; a failure that
shows a 500 has its traceback in the captured log of the uvicorn thread."""

from __future__ import annotations

import httpx
import openai
import pytest
from chat_support import FAIL, QUESTION, SECRET, TOKEN, chat_server  # noqa: F401 (the fixture)

from ragkit.server.chat.turns import model_names


@pytest.fixture(scope="module")
def client(chat_server) -> openai.OpenAI:  # noqa: F811
    return openai.OpenAI(base_url=f"{chat_server.workspace_url}/v1", api_key=TOKEN, max_retries=0)


def ask(client: openai.OpenAI, text: str, model: str = "ragkit:mix", **kwargs):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], **kwargs)


def streamed(client: openai.OpenAI, text: str, model: str = "ragkit:mix"):
    chunks = list(client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}], stream=True,
        stream_options={"include_usage": True}))
    return chunks, "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def assert_references_in_both_forms(text: str, references: list[dict]) -> None:
    assert references, "no structured references"
    block = text[text.index("### References"):]
    for ref in references:
        assert ref["doc_id"].startswith("doc-") and ref["chunk_ids"]
        assert f"- [{ref['number']}] {ref['file_path']}" in block


def test_models_are_the_modes(client, chat_server):  # noqa: F811
    assert [m.id for m in client.models.list()] == model_names()
    model = client.models.retrieve("ragkit:ppr")
    assert (model.id, model.object, model.owned_by) == ("ragkit:ppr", "model", "ragkit")
    assert set(chat_server.seen) == {"demo"}, "the workspace path parameter reaches the context dependency"


def test_completion_answers_with_references(client):
    reply = ask(client, QUESTION)
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    assert reply.model == "ragkit:mix"
    choice = reply.choices[0]
    assert (choice.index, choice.finish_reason, choice.message.role) == (0, "stop", "assistant")
    assert "Haijia" in choice.message.content
    assert_references_in_both_forms(choice.message.content, reply.model_extra["references"])
    usage = reply.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_streamed_completion_is_the_same_answer(client):
    whole = ask(client, QUESTION)
    chunks, text = streamed(client, QUESTION)
    assert len(chunks) > 5, "the answer came in one piece, not streamed"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert text == whole.choices[0].message.content
    last, usage = chunks[-2], chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["references"] == whole.model_extra["references"]
    assert usage.choices == [] and usage.usage.completion_tokens > 0


@pytest.mark.parametrize("mode", ["naive", "local", "global", "ppr"])
def test_mode_by_model_name_or_prefix_is_the_mode_run(client, mode):
    by_name = ask(client, QUESTION, model=f"ragkit:{mode}")
    by_prefix = ask(client, f"/{mode} {QUESTION}", model="ragkit:mix")
    assert by_name.model == by_prefix.model == f"ragkit:{mode}"  # the mode the engine reports it ran
    # Same mode, same question (prefix stripped), deterministic LLM: the same answer.
    assert by_prefix.choices[0].message.content == by_name.choices[0].message.content
    _, text = streamed(client, f"/{mode} {QUESTION}")
    assert text == by_name.choices[0].message.content


def test_bypass_retrieves_nothing(client):
    reply = ask(client, f"/bypass {QUESTION}")
    assert reply.model == "ragkit:bypass"
    assert reply.model_extra["references"] == [] and "### References" not in reply.choices[0].message.content


def test_history_and_system_prompt_reach_the_answer_call(client, chat_server):  # noqa: F811
    reply = client.chat.completions.create(model="ragkit:local", messages=[
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "/naive Who is Gu Yao?"},
        {"role": "assistant", "content": "Gu Yao leads Project Haijia [1]."},
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
    ], temperature=0.2, max_tokens=200)
    assert reply.model == "ragkit:local"
    assert_references_in_both_forms(reply.choices[0].message.content, reply.model_extra["references"])
    request = chat_server.llm.answers[-1]
    assert request.prompt == QUESTION and "Answer in one line." in request.system
    assert [(m.role, m.content) for m in request.history] == [
        ("user", "Who is Gu Yao?"), ("assistant", "Gu Yao leads Project Haijia [1].")]


def test_model_failure_is_an_error_without_secrets(client, caplog):
    caplog.set_level("WARNING", logger="ragkit.server.chat")
    with pytest.raises(openai.APIStatusError) as err:
        ask(client, f"{FAIL} {QUESTION}")
    assert err.value.status_code == 502 and "the model failed" in err.value.body["message"]
    assert SECRET not in str(err.value.body)
    stream = client.chat.completions.create(
        model="ragkit:mix", messages=[{"role": "user", "content": f"{FAIL} {QUESTION}"}], stream=True)
    with pytest.raises(openai.APIError) as err:  # headers were sent: the error is an SSE event
        list(stream)
    assert "the model failed" in str(err.value) and SECRET not in str(err.value)
    assert "the model failed" in caplog.text and SECRET not in caplog.text  # the server's log too


def test_unknown_model_is_404_naming_the_models(client):
    with pytest.raises(openai.NotFoundError) as err:
        ask(client, QUESTION, model="gpt-4o")
    error = err.value.body
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert error["type"] == "not_found_error" and "ragkit:mix" in error["message"]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("ragkit:nope")


@pytest.mark.parametrize("messages, status, words", [
    ([{"role": "user", "content": "/lokal who?"}], 400, "unknown mode prefix"),
    ([{"role": "assistant", "content": "hi"}], 400, "last message must be the user's"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}], 400, "image_url"),
    ([{"role": "user", "content": "x" * 4001}], 413, "max_message_chars=4000"),
    ([{"role": "wizard", "content": "hi"}], 400, "messages.0.role"),
    ([], 400, "messages"),
])
def test_bad_requests_get_openai_errors(client, messages, status, words):
    with pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(model="ragkit:mix", messages=messages)
    assert err.value.status_code == status
    body = err.value.body
    assert words in body["message"] and body["type"] == "invalid_request_error"
    assert set(body) == {"message", "type", "param", "code"}


def test_more_than_one_choice_is_refused(client):
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, QUESTION, n=2)
    assert err.value.body["param"] == "n"


def test_wrong_key_is_an_authentication_error(chat_server):  # noqa: F811
    bad = openai.OpenAI(base_url=f"{chat_server.url}/v1", api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as err:
        ask(bad, QUESTION)
    assert err.value.body["type"] == "authentication_error"
    assert "not-the-key" not in str(err.value.body)
    raw = httpx.get(f"{chat_server.url}/v1/models")
    assert raw.status_code == 401 and raw.headers["www-authenticate"] == "Bearer"


def test_a_client_leaving_mid_stream_leaves_the_server_well(client, chat_server):  # noqa: F811
    body = {"model": "ragkit:mix", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    for _ in range(3):
        with httpx.stream("POST", f"{chat_server.url}/v1/chat/completions", json=body, timeout=60,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            first = next(r.iter_lines())
            assert first.startswith("data: {")  # then hang up with the answer unread
    assert "Haijia" in ask(client, QUESTION).choices[0].message.content
