"""What the MCP tests share: the corpus with its canaries, the SDK's clients
over both transports, and the checks of what a restricted principal sees.

T1 may be read by everyone; T2 (access group ``secret``) holds the canaries:
an entity only it names (Zorblax Quintaria, of Vexholm), its path, and a
mention of an entity T1 has too (Ada Lovelace), so a graph read of Ada must
show T1's part only. (A module of its own, not conftest: see
tests/server/server_support.py.)"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from ragkit.query.modes import available_modes

T1 = "Ada Lovelace lived in London. Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage."
T2 = "Zorblax Quintaria guards the vault of Vexholm. Ada Lovelace met Zorblax Quintaria in Vexholm."
T2_PATH = "vault/zorblax-secret.txt"
CANARIES = ("zorblax", "vexholm", "quintaria", "zorblax-secret")
QUESTION = "Whom did Ada Lovelace meet, and who guards the vault?"
"""No canary in the question itself: its keywords come back in the metadata."""
MODES = [m.name for m in available_modes() if m.name != "bypass"]
READ_TOOLS = {"query", "retrieve_context", "search_entities", "get_entity", "get_relation", "list_documents"}
ENV = {"RAGKIT_LLM": "offline", "RAGKIT_EMBEDDER": "hash"}
"""The models of every MCP test: the offline LLM and the hash embedder (no network)."""


def text_of(result: CallToolResult) -> str:
    """Everything a tool call answered, as one string to search."""
    parts = [c.text for c in result.content if getattr(c, "text", None)]
    return "\n".join(parts) + json.dumps(result.structured_content or {})


def leaked(text: str) -> list[str]:
    lowered = text.lower()
    return [c for c in CANARIES if c in lowered]


def stdio_params(working_dir: Path, **mcp: str) -> StdioServerParameters:
    """``ragkit mcp`` as a real subprocess; ``mcp`` sets the ``[mcp]`` section (user, groups, scope)."""
    env = {**ENV, "RAGKIT_WORKING_DIR": str(working_dir), "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
           "RAGKIT_TEST_DOUBLES": "1", **{f"RAGKIT_MCP__{k.upper()}": v for k, v in mcp.items()}}
    return StdioServerParameters(command=sys.executable, args=["-m", "ragkit", "mcp"], env=env,
                                 cwd=str(working_dir.parent))


@asynccontextmanager
async def stdio_session(working_dir: Path, **mcp: str) -> AsyncIterator[ClientSession]:
    with open(working_dir.parent / "mcp-stderr.log", "a") as errlog:
        async with stdio_client(stdio_params(working_dir, **mcp), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def http_session(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def tool_names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def every_read(session: ClientSession) -> dict[str, CallToolResult]:
    """Each read tool, asked about the canaries (query and context in every mode)."""
    calls: dict[str, tuple[str, dict]] = {}
    for mode in MODES:
        calls[f"query/{mode}"] = ("query", {"question": QUESTION, "mode": mode})
        calls[f"retrieve_context/{mode}"] = ("retrieve_context", {"question": QUESTION, "mode": mode})
    calls.update({
        "search_entities/zorblax": ("search_entities", {"text": "zorblax"}),
        "search_entities/a": ("search_entities", {"text": "a", "limit": 200}),
        "get_entity/zorblax": ("get_entity", {"name": "Zorblax Quintaria"}),
        "get_entity/ada": ("get_entity", {"name": "Ada Lovelace"}),
        "get_entity/vexholm": ("get_entity", {"name": "Vexholm"}),
        "get_relation/ada-zorblax": ("get_relation", {"source": "Ada Lovelace", "target": "Zorblax Quintaria"}),
        "list_documents": ("list_documents", {"limit": 1000}),
    })
    return {label: await session.call_tool(name, args) for label, (name, args) in calls.items()}
