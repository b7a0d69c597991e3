"""``ragkit mcp [--workspace NAME]``: the MCP server over stdio (ragkit.mcp.stdio).

Stdout is the protocol's channel: this command prints nothing else there."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from ragkit.errors import ConfigError, describe_validation_error
from ragkit.settings import check_workspace, load_settings


def run(args: argparse.Namespace) -> int:
    try:
        from ragkit.mcp.stdio import serve_stdio
    except ImportError as exc:
        raise ConfigError(f"`ragkit mcp` needs the mcp extra ({exc.name} is missing): pip install 'ragkit[mcp]'") from None
    settings = load_settings(args.config).settings
    if args.workspace:
        try:
            settings = settings.model_copy(update={"workspace": check_workspace(args.workspace)})
        except ValueError as exc:
            raise ConfigError(f"--workspace: {describe_validation_error(exc)}") from None
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="ragkit mcp: %(levelname)s %(name)s: %(message)s")
    who = settings.mcp
    if who.user is None:
        print(f"ragkit mcp: workspace {settings.workspace!r}, unrestricted: the client reads every document "
              "(set [mcp] user and groups to read as a principal)", file=sys.stderr)
    else:
        print(f"ragkit mcp: workspace {settings.workspace!r} as user {who.user!r}"
              f"{' groups ' + ','.join(who.groups) if who.groups else ''}, scope {who.scope}", file=sys.stderr)
    asyncio.run(serve_stdio(settings))
    return 0
