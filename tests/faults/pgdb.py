"""The ``postgres`` combination of the fault campaign: every store on the
PostgreSQL server at ``RAGKIT_POSTGRES_URL`` (``scripts/test-services``
exports it), each trial in a database of its own, created before the trial
and dropped after it, so trials share nothing (not even the HNSW index of the
vectors' table, which the stores share across workspaces of one database).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse, urlunparse

KINDS = ("kv", "doc_status", "vector", "graph")
_NAME = re.compile(r"^fz_[0-9a-f]{10}$")


def server_url(root: Path) -> str:
    """The server's URL; unreachable is a ``CampaignError``, never a skip."""
    import pytest

    from ragkit.plugins import get_registry
    from ragkit.testing.contracts.options import contract_options

    from .campaign import CampaignError

    for kind in KINDS:
        if "postgres" not in get_registry().names(kind):
            raise CampaignError(f"{kind} adapter 'postgres' is not installed (make install)")
    try:
        return contract_options("kv", "postgres", root)["dsn"]
    except pytest.skip.Exception as exc:
        raise CampaignError(
            f"the postgres combination needs PostgreSQL with pgvector, which is unreachable: {exc.msg}. "
            "Run under scripts/test-services (make faults does)."
        ) from None


def trial_dsn(url: str, database: str) -> str:
    return urlunparse(urlparse(url)._replace(path="/" + database))


def postgres_env(url: str, database: str) -> dict[str, str]:
    """``RAGKIT_*`` of all four stores on the trial's database."""
    env = {}
    for kind in KINDS:
        env[f"RAGKIT_{kind.upper()}"] = "postgres"
        env[f"RAGKIT_{kind.upper()}__DSN"] = trial_dsn(url, database)
    return env


def _checked(database: str) -> str:
    # A database name cannot be a bound parameter (DDL): only names this module made pass.
    if not _NAME.fullmatch(database):
        raise ValueError(f"not a trial database name: {database!r}")
    return database


async def create_database(url: str, database: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'CREATE DATABASE "{_checked(database)}"')
    finally:
        await conn.close()


async def drop_database(url: str, database: str) -> None:
    """Drop it, ending any session left in it (a killed process's, until the
    server notices; ``WITH (FORCE)``: PostgreSQL 13 or later)."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{_checked(database)}" WITH (FORCE)')
        left = await conn.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", database)
    finally:
        await conn.close()
    if left:
        raise RuntimeError(f"trial database {database} is still there after DROP DATABASE")
