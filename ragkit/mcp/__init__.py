"""ragkit as an MCP server, on the official ``mcp`` SDK: the tools
(``ragkit.mcp.tools``) over stdio (``ragkit mcp``, ``ragkit.mcp.stdio``) and
over streamable HTTP under ``ragkit serve`` (``/w/{workspace}/mcp``,
``ragkit.server.mcp_http``). docs/server.md#mcp."""
