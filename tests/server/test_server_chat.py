"""The chat endpoints as ``ragkit serve`` mounts them: the official ``openai``
and ``ollama`` clients against the real server, with the server's own API
keys (workspace binding, principal) rather than the chat tests' stand-in."""

from __future__ import annotations

import ollama
import openai
import pytest

from server_support import client, wait_job

W = "/w/other"


@pytest.fixture(scope="module")
def indexed(served):
    server, keys = served
    with client(server, keys.other) as c:
        r = c.post(f"{W}/documents/texts", json={"texts": [
            "Marguerite Vell founded the Tidewater Lantern Guild in Portmere in 1843.",
        ], "file_paths": ["notes/guild.txt"]})
        assert r.status_code == 202, r.text
        assert wait_job(c, r.json()["url"])["state"] == "done"
    return served


def test_openai_client_on_the_server(indexed):
    server, keys = indexed
    oa = openai.OpenAI(base_url=f"{server.url}{W}/v1", api_key=keys.other, max_retries=0)
    assert "ragkit:naive" in {m.id for m in oa.models.list()}
    reply = oa.chat.completions.create(model="ragkit:naive", messages=[
        {"role": "user", "content": "Who founded the Tidewater Lantern Guild?"}])
    refs = reply.model_extra["references"]
    assert reply.model == "ragkit:naive" and [r["file_path"] for r in refs] == ["notes/guild.txt"]
    streamed = oa.chat.completions.create(model="ragkit:naive", stream=True, messages=[
        {"role": "user", "content": "Who founded the Tidewater Lantern Guild?"}])
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == reply.choices[0].message.content


def test_ollama_client_on_the_server(indexed):
    server, keys = indexed
    ol = ollama.Client(host=f"{server.url}{W}", headers={"Authorization": f"Bearer {keys.other}"})
    assert "ragkit:mix" in {m.model for m in ol.list().models}
    reply = ol.chat(model="ragkit:naive", messages=[{"role": "user", "content": "Who founded the guild in Portmere?"}])
    pieces = ol.chat(model="ragkit:naive", stream=True,
                     messages=[{"role": "user", "content": "Who founded the guild in Portmere?"}])
    assert "".join(p.message.content for p in pieces) == reply.message.content and reply.done


def test_chat_keys_are_bound_to_their_workspaces(indexed):
    """A key of workspace alpha cannot chat with workspace other (403, the same
    for a workspace that does not exist), and no key is a 401."""
    server, keys = indexed
    for ws in ("other", "nosuchworkspace"):
        oa = openai.OpenAI(base_url=f"{server.url}/w/{ws}/v1", api_key=keys.reader, max_retries=0)
        with pytest.raises(openai.PermissionDeniedError) as denied:
            oa.chat.completions.create(model="ragkit:naive", messages=[{"role": "user", "content": "Portmere?"}])
        assert "Marguerite" not in str(denied.value.body)
    with pytest.raises(ollama.ResponseError) as err:
        ollama.Client(host=f"{server.url}{W}").chat(model="ragkit:naive", messages=[{"role": "user", "content": "x"}])
    assert err.value.status_code == 401
