"""Chat answers are made as the key's principal: through both protocols,
plain and streamed, in every retrieving mode, a user who may not read the
secret document gets none of its canaries (text, path, id) in the answer or
the structured references; its reader gets them. Proves the chat routes pass
``principal=`` to ``RAG.aquery`` (the engine's own filtering is tested in
tests/access)."""

from __future__ import annotations

import json

import httpx
import ollama
import openai
import pytest
from chat_support import CANARIES, CEO_TOKEN, TOKEN, chat_server  # noqa: F401 (the fixture)

from ragkit.query.modes import available_modes

QUESTION = "Who leads Project Orchid, and what is its code?"
MODES = [m.name for m in available_modes() if m.name != "bypass"]


def openai_texts(url: str, key: str, mode: str) -> list[str]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    messages = [{"role": "user", "content": QUESTION}]
    whole = client.chat.completions.create(model=f"ragkit:{mode}", messages=messages)
    chunks = list(client.chat.completions.create(model=f"ragkit:{mode}", messages=messages, stream=True))
    return [whole.choices[0].message.content, json.dumps(whole.model_extra["references"]),
            "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
            json.dumps([c.model_extra.get("references") for c in chunks])]


def ollama_texts(url: str, key: str, mode: str) -> list[str]:
    client = ollama.Client(host=url, headers={"Authorization": f"Bearer {key}"})
    whole = client.chat(model=f"ragkit:{mode}", messages=[{"role": "user", "content": QUESTION}], stream=False)
    parts = list(client.generate(model=f"ragkit:{mode}", prompt=QUESTION, stream=True))
    raw = httpx.post(f"{url}/api/chat", headers={"Authorization": f"Bearer {key}"}, timeout=60, json={
        "model": f"ragkit:{mode}", "messages": [{"role": "user", "content": QUESTION}], "stream": False})
    return [whole.message.content, "".join(p.response for p in parts), raw.text]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("texts", [openai_texts, ollama_texts], ids=["openai", "ollama"])
def test_unreadable_document_never_reaches_the_chat(chat_server, texts, mode):  # noqa: F811
    for text in texts(chat_server.workspace_url, TOKEN, mode):
        leaked = [c for c in CANARIES if c in text]
        assert not leaked, f"{mode}: alice saw {leaked}"


@pytest.mark.parametrize("texts", [openai_texts, ollama_texts], ids=["openai", "ollama"])
def test_its_reader_gets_it(chat_server, texts):  # noqa: F811
    answer = texts(chat_server.workspace_url, CEO_TOKEN, "mix")[0]
    assert "CANARY-PLUM-4417" in answer and "secret/orchid.md" in answer
