"""The MCP server object: ragkit's tools on the SDK's ``MCPServer``, with the
caller of each request resolved by the transport (``resolve``) and the write
tools listed only to callers that may write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer

from ragkit import __version__
from ragkit.mcp.tools import TOOLS, WRITE_TOOLS, Caller
from ragkit.query.modes import available_modes

Resolve = Callable[[ServerRequestContext[Any, Any]], Caller]
"""The caller of one request; raises ``ToolError`` when there is none."""
INSTRUCTIONS = (
    "A graph-RAG knowledge base (ragkit). Ask with `query` (an answer with numbered references) or "
    "`retrieve_context` (the passages, entities and relations only); explore the graph with "
    "`search_entities`, then `get_entity` / `get_relation` for descriptions and sources; "
    "`list_documents` pages through the documents. Everything is limited to what this caller may read."
)


class RagkitMCP(MCPServer):
    def __init__(self, resolve: Resolve) -> None:
        super().__init__("ragkit", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING",
                         middleware=[self._hide_write_tools])
        self.resolve = resolve
        modes = "; ".join(f"{m.name}: {m.description}" for m in available_modes())
        for tool in TOOLS:
            description = (tool.__doc__ or "").strip()
            if "mode" in tool.__wrapped__.__code__.co_varnames:
                description += f"\n\nModes ({modes})."
            self.add_tool(tool, description=description)

    async def _hide_write_tools(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)  # the wire form: a dict
        if ctx.method == "tools/list" and isinstance(result, dict) and not self.resolve(ctx).can_write:
            return {**result, "tools": [t for t in result.get("tools", []) if t.get("name") not in WRITE_TOOLS]}
        return result
