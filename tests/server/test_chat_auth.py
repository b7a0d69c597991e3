"""Every chat route depends on the app's context dependency, so nothing is
whitelisted: each route of both routers, under the workspace prefix and at
the root, is a 401 without the key and answers with it.

Troubleshooting: a new route needs a valid body in ``BODIES`` below."""

from __future__ import annotations

import httpx
import pytest
from chat_support import QUESTION, TOKEN, chat_server  # noqa: F401 (the fixture)
from fastapi.routing import APIRoute

from ragkit.server.chat import ollama_router, openai_router

ASK = [{"role": "user", "content": QUESTION}]
BODIES = {
    "/api/show": {"model": "ragkit:mix"},
    "/api/chat": {"model": "ragkit:naive", "messages": ASK, "stream": False},
    "/api/generate": {"model": "ragkit:naive", "prompt": QUESTION, "stream": False},
    "/v1/chat/completions": {"model": "ragkit:naive", "messages": ASK},
}


async def marker() -> None:
    """A context dependency to find in the routes' dependency lists."""


def routes() -> list[tuple[str, str]]:
    found = []
    for factory in (ollama_router, openai_router):
        for route in factory(marker).routes:
            assert isinstance(route, APIRoute)
            assert marker in [d.call for d in route.dependant.dependencies], f"{route.path} skips the context"
            found += [(method, route.path) for method in sorted(route.methods)]
    return found


ROUTES = routes()


def test_the_routes_are_the_documented_ones():
    assert sorted(path for _, path in ROUTES) == sorted([
        "/api/version", "/api/tags", "/api/ps", "/api/show", "/api/chat", "/api/generate",
        "/v1/models", "/v1/models/{model}", "/v1/chat/completions"])


@pytest.mark.parametrize("prefix", ["/w/demo", ""])
@pytest.mark.parametrize("method, path", ROUTES)
def test_no_key_401_key_200(chat_server, prefix, method, path):  # noqa: F811
    url = chat_server.url + prefix + path.replace("{model}", "ragkit:mix")
    body = BODIES.get(path)
    for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}):
        refused = httpx.request(method, url, json=body, headers=headers, timeout=60)
        assert refused.status_code == 401, (method, url, headers)
        assert "error" in refused.json() and QUESTION not in refused.text
    allowed = httpx.request(method, url, json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert allowed.status_code == 200, allowed.text
