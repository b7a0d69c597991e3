"""``ragkit mcp`` over stdio, driven by the ``mcp`` SDK's own client
(``stdio_client`` spawning the command as a real subprocess): the tools it
lists, each tool called, the principal of ``[mcp]`` (a restricted one sees no
canary through any tool; its reader sees them), and ``[mcp] scope``.

Troubleshooting: the server's stderr is in ``mcp-stderr.log`` next to the
test's working dir; a hang at ``initialize`` means something wrote to stdout
(the protocol's channel) or the command failed to start.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_support import (
    ENV, QUESTION, READ_TOOLS, T1, T2, T2_PATH, every_read, leaked, stdio_session, text_of, tool_names,
)
from ragkit.access import AccessList
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import load_settings


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    """T1 for everyone, T2 for group ``secret``, indexed as ``ragkit mcp`` will read them."""
    working_dir = tmp_path_factory.mktemp("mcp-stdio") / "data"

    async def build() -> None:
        settings = load_settings(env={**ENV, "RAGKIT_WORKING_DIR": str(working_dir)}).settings
        async with RAG(settings) as rag:
            secret = Document.from_text(T2, file_path=T2_PATH).model_copy(update={"access": AccessList(groups=["secret"])})
            _, report = await rag.ainsert(documents=[Document.from_text(T1, file_path="t1.txt"), secret])
            assert len(report.processed) == 2 and not report.failed, report

    asyncio.run(build())
    return working_dir


async def test_lists_the_read_tools_with_schemas(indexed):
    """Read scope (the default): the six read tools, each described, with an
    input schema; insert_texts is neither listed nor callable."""
    async with stdio_session(indexed, user="olga") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == READ_TOOLS
        for tool in tools.values():
            assert tool.description and tool.input_schema["type"] == "object", tool.name
        assert "ppr" in tools["query"].description and "naive" in tools["query"].description  # every mode, explained
        assert tools["query"].input_schema["required"] == ["question"]
        assert tools["query"].output_schema is not None
        refused = await session.call_tool("insert_texts", {"texts": ["Mallory was here."]})
        assert refused.is_error and "write access" in text_of(refused) and "[mcp] scope" in text_of(refused)
        listed = await session.call_tool("list_documents", {})
        assert "mallory" not in text_of(listed).lower()


async def test_a_restricted_principal_sees_no_canary_through_any_tool(indexed):
    async with stdio_session(indexed, user="olga", groups="team") as session:
        results = await every_read(session)
    for label, result in results.items():
        assert not leaked(text_of(result)), f"{label}: {text_of(result)[:400]}"
    assert not results["query/ppr"].is_error and "Ada Lovelace" in text_of(results["query/ppr"])
    assert results["search_entities/zorblax"].structured_content == {"names": []}
    assert results["get_entity/zorblax"].is_error and "search_entities" in text_of(results["get_entity/zorblax"])
    assert results["get_relation/ada-zorblax"].is_error
    ada = results["get_entity/ada"].structured_content
    assert [s["file_path"] for s in ada["sources"]] == ["t1.txt"]
    assert results["list_documents"].structured_content["total"] == 1


async def test_its_reader_sees_the_canaries(indexed):
    """The same calls as group ``secret``: the canaries are there to be found,
    so their absence above is the access rule, not an empty index."""
    async with stdio_session(indexed, user="sam", groups="secret") as session:
        results = await every_read(session)
    assert leaked(text_of(results["query/local"])) and leaked(text_of(results["retrieve_context/ppr"]))
    assert results["search_entities/zorblax"].structured_content == {"names": ["zorblax quintaria"]}
    assert not results["get_relation/ada-zorblax"].is_error
    assert T2_PATH in text_of(results["get_entity/zorblax"])
    assert results["list_documents"].structured_content["total"] == 2


async def test_write_scope_inserts_as_the_principal(indexed):
    """``[mcp] scope = "write"`` lists insert_texts; the documents are written
    as the principal: readable by it, and a list that would hide them from it
    is refused."""
    async with stdio_session(indexed, user="olga", scope="write") as session:
        assert "insert_texts" in await tool_names(session)
        done = await session.call_tool("insert_texts", {"texts": ["Brigid Okafor repairs lighthouses in Cobh."],
                                                        "file_paths": ["notes/brigid.txt"]})
        assert not done.is_error, text_of(done)
        assert len(done.structured_content["processed"]) == 1
        found = await session.call_tool("search_entities", {"text": "brigid"})
        assert found.structured_content["names"] == ["brigid okafor"]
        hidden = await session.call_tool("insert_texts", {"texts": ["Nobody may read this."], "access_users": ["ceo"]})
        assert hidden.is_error and "WriteAccessError" in text_of(hidden)


async def test_bad_input_is_a_tool_error_naming_the_fix(indexed):
    async with stdio_session(indexed) as session:  # no [mcp] user: unrestricted, as the ragkit command
        unknown_mode = await session.call_tool("query", {"question": QUESTION, "mode": "lokal"})
        assert unknown_mode.is_error and "lokal" in text_of(unknown_mode) and "ppr" in text_of(unknown_mode)
        bad_status = await session.call_tool("list_documents", {"status": "finished"})
        assert bad_status.is_error and "processed" in text_of(bad_status)
        empty = await session.call_tool("query", {"question": ""})
        assert empty.is_error and "question" in text_of(empty)
        everything = await session.call_tool("retrieve_context", {"question": QUESTION, "mode": "local"})
        assert leaked(text_of(everything)), "unrestricted reads T2 too"


def test_the_command_is_listed_and_checks_its_workspace(tmp_path):
    """``ragkit --help`` lists ``mcp``; a bad ``--workspace`` is exit status 2
    naming the rule, before anything is opened or written to stdout."""
    env = {**os.environ, **ENV, "RAGKIT_WORKING_DIR": str(tmp_path / "data")}
    helped = subprocess.run([sys.executable, "-m", "ragkit", "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "mcp" in helped.stdout.split("COMMAND", 1)[1]
    bad = subprocess.run([sys.executable, "-m", "ragkit", "mcp", "--workspace", "../Up"], capture_output=True,
                         text=True, env=env, stdin=subprocess.DEVNULL)
    assert bad.returncode == 2 and "--workspace" in bad.stderr and "lowercase" in bad.stderr, bad.stderr
    assert bad.stdout == "" and not (tmp_path / "data").exists()
