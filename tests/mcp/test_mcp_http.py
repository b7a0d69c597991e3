"""The MCP tools over streamable HTTP under ``ragkit serve`` (``/w/{ws}/mcp``),
driven by the ``mcp`` SDK's own client (``streamable_http_client``) against a
live server on loopback: the same keys and principal rules as every other
route (401 without a key, 403 for a key of another workspace, the write tool
for write-scope keys only), each tool called, and a restricted principal
seeing no canary through any tool while its reader sees them.

Troubleshooting: the server's log is ``server-<port>.log`` next to its
working dir; a 404 on the endpoint means ``mount_mcp`` did not run in
``create_app``; a hang means the SDK's session manager is not running (the
app's lifespan).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client, ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from mcp_support import (
    QUESTION, READ_TOOLS, T1, T2, T2_PATH, every_read, http_session, leaked, text_of, tool_names,
)
from server_support import LEAK_CANARY, Keys, Server, make_keys
from ragkit.server.keys import KeyStore

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[Server, Keys, str]]:
    """The server, its keys, and an insider key (group ``secret``, write) for T2."""
    working_dir = tmp_path_factory.mktemp("mcp-http") / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    insider = KeyStore(working_dir / "server_keys.sqlite").create(["alpha"], "sam", ["secret"], "write")[1]
    server = Server(working_dir).start()  # the offline LLM (with a credential it must never show) and hash embedder
    try:
        yield server, keys, insider
    finally:
        server.stop()


def url(server: Server, workspace: str = "alpha") -> str:
    return f"{server.url}/w/{workspace}/mcp"


@pytest.fixture(scope="module")
def corpus(served) -> None:
    """T1 by the writer for everyone, T2 by the insider for group ``secret``, through insert_texts."""
    server, keys, insider = served

    async def insert(key: str, **args: object) -> CallToolResult:
        async with http_session(url(server), key) as session:
            return await session.call_tool("insert_texts", args)

    public = asyncio.run(insert(keys.writer, texts=[T1], file_paths=["t1.txt"]))
    secret = asyncio.run(insert(insider, texts=[T2], file_paths=[T2_PATH], access_groups=["secret"]))
    for done in (public, secret):
        assert not done.is_error and len(done.structured_content["processed"]) == 1, text_of(done)


def test_no_key_is_a_401_and_another_workspace_a_403(served):
    server, keys, _ = served
    for headers in ({}, {"Authorization": "Bearer rk_not-a-key"}):
        r = httpx.post(url(server), json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=60)
        assert r.status_code == 401 and "ragkit keys create" in r.json()["error"], r.text
    r = httpx.post(url(server), json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {keys.other}"},
                   timeout=60)
    assert r.status_code == 403 and r.json() == {"error": "this key may not use this workspace with this scope"}
    cross = httpx.post(url(server), json=INITIALIZE, timeout=60, headers={
        **MCP_HEADERS, "Authorization": f"Bearer {keys.reader}", "Origin": "https://evil.example"})
    assert cross.status_code == 403 and "allowed_origins" in cross.text  # the perimeter holds here too


async def test_the_sdk_client_without_a_key_fails_before_any_tool(served):
    """The SDK's client gets the 401 at ``initialize`` (its error is generic:
    the statuses are read off its HTTP client) and reaches no tool."""
    server, _, _ = served
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    with pytest.raises(BaseExceptionGroup) as caught:
        async with httpx2.AsyncClient(timeout=60, event_hooks={"response": [record]}) as http:
            async with streamable_http_client(url(server), http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
    assert caught.group_contains(MCPError, match="error response")
    assert statuses == [401]


async def test_a_read_key_lists_no_write_tool_and_cannot_insert(served, corpus):
    server, keys, _ = served
    async with http_session(url(server), keys.reader) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == READ_TOOLS
        assert all(t.description and t.input_schema["properties"] for t in tools.values())
        refused = await session.call_tool("insert_texts", {"texts": ["Mallory was here."]})
        assert refused.is_error and "write access" in text_of(refused) and "--scope write" in text_of(refused)
        listed = await session.call_tool("list_documents", {})
    assert listed.structured_content["total"] == 1 and "mallory" not in text_of(listed).lower()
    async with http_session(url(server), keys.writer) as session:
        assert await tool_names(session) == READ_TOOLS | {"insert_texts"}


async def test_a_restricted_principal_sees_no_canary_through_any_tool(served, corpus):
    server, keys, insider = served
    async with http_session(url(server), keys.reader) as session:  # rita, group team
        results = await every_read(session)
    for label, result in results.items():
        assert not leaked(text_of(result)), f"{label}: {text_of(result)[:400]}"
    assert "Ada Lovelace" in text_of(results["query/ppr"]) and results["query/ppr"].structured_content["references"]
    assert results["search_entities/zorblax"].structured_content == {"names": []}
    assert results["get_entity/zorblax"].is_error and results["get_relation/ada-zorblax"].is_error
    assert [s["file_path"] for s in results["get_entity/ada"].structured_content["sources"]] == ["t1.txt"]
    async with http_session(url(server), insider) as session:  # the control: the canaries are there
        seen = await every_read(session)
    assert leaked(text_of(seen["retrieve_context/local"])) and not seen["get_relation/ada-zorblax"].is_error
    assert seen["search_entities/zorblax"].structured_content == {"names": ["zorblax quintaria"]}
    assert seen["list_documents"].structured_content["total"] == 2


async def test_errors_name_the_problem_and_keep_secrets(served, corpus):
    server, keys, _ = served
    async with http_session(url(server), keys.admin) as session:  # bound to every workspace
        unknown_mode = await session.call_tool("query", {"question": QUESTION, "mode": "lokal"})
        assert unknown_mode.is_error and "ppr" in text_of(unknown_mode)
    async with http_session(url(server, "nowhere"), keys.admin) as session:
        missing = await session.call_tool("list_documents", {})
        assert missing.is_error and "no workspace 'nowhere' yet" in text_of(missing)
        assert not (server.working_dir / "nowhere").exists(), "a read never creates a workspace"
        created = await session.call_tool("insert_texts", {"texts": ["Nowhere has one document now."]})
        assert not created.is_error, text_of(created)
        listed = await session.call_tool("list_documents", {})
        assert listed.structured_content["total"] == 1
    log = server.log_text()
    for secret in (keys.admin, keys.writer, keys.reader, LEAK_CANARY):
        assert secret not in log and secret not in text_of(unknown_mode) + text_of(missing)


async def test_the_high_level_client_gets_the_same_rules(served, corpus):
    """``mcp.Client`` negotiates the newest protocol (its requests take the
    SDK's other server path): the same tools, the same refusal, the same view."""
    server, keys, _ = served
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys.reader}"}, timeout=120) as http:
        async with Client(streamable_http_client(url(server), http_client=http)) as client:
            assert {t.name for t in (await client.list_tools()).tools} == READ_TOOLS
            refused = await client.call_tool("insert_texts", {"texts": ["Mallory was here."]})
            context = await client.call_tool("retrieve_context", {"question": QUESTION, "mode": "local"})
    assert refused.is_error and "write access" in text_of(refused)
    assert "Ada Lovelace" in text_of(context) and not leaked(text_of(context))
