"""Test support for ragkit-postgres: the server the tests use.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of every store: the server at
``RAGKIT_POSTGRES_URL``, or a skip naming how to start one.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from ragkit.testing.contracts.options import reachable_url


def postgres_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """The server at ``RAGKIT_POSTGRES_URL`` (a loopback port; pgvector installed)."""
    url = reachable_url(
        "RAGKIT_POSTGRES_URL",
        "e.g. postgresql://postgres@127.0.0.1:5432/postgres after "
        "`RAGKIT_POSTGRES_PORT=5432 plugins/ragkit-postgres/scripts/postgres-server start`",
        5432,
    )
    return {"dsn": url}


def fresh_prefix() -> str:
    """A ``table_prefix`` no other test uses: its own tables, made on first open."""
    return f"t{uuid.uuid4().hex[:12]}"


async def drop_prefix(url: str, prefix: str) -> None:
    """Drop every table of ``prefix`` from the server at ``url``."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE $1", prefix + "\\_%")
        for (name,) in tables:
            await conn.execute(f'DROP TABLE "{name}"')
    finally:
        await conn.close()


CONTRACT_OPTIONS = {
    "kv:postgres": postgres_options,
    "doc_status:postgres": postgres_options,
    "vector:postgres": postgres_options,
    "graph:postgres": postgres_options,
}
