"""A failed statement names what the store was doing, and never the password.

Each case opens a store as a PostgreSQL role that lacks one privilege on one
of the store's tables (``REVOKE``: the server refuses the statement at once),
asks the store for what needs it and checks the ``StoreError``: the
operation's words, the dsn with the password masked. What a user reads is the
only clue to which call failed when one of many concurrent writes does.

Troubleshoot: the words are ``PostgresStore.read(what)`` / ``write(what)``'s
argument at each call.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import numpy as np
import pytest

from ragkit.errors import StoreError
from ragkit.protocols import StoreConfig
from ragkit.protocols.lease import Holder
from ragkit.schema import DocStatus
from ragkit.testing.denied import OPEN, PASSWORD, Action, as_user, check_refusal, listed, pending, refusal
from ragkit_postgres import PostgresDocStatusStore, PostgresGraphStore, PostgresKVStore, PostgresVectorStore
from ragkit_postgres.testing import drop_prefix, fresh_prefix

STORES = {"kv": PostgresKVStore, "kv-text": PostgresKVStore, "kv-indexed": PostgresKVStore, "doc_status": PostgresDocStatusStore,
          "graph": PostgresGraphStore, "vector": PostgresVectorStore, "vector-walk": PostgresVectorStore,
          "vector-one": PostgresVectorStore}
# "vector-walk": a search walks the index, with no count first; "vector-one":
# the smallest threshold that still counts the rows.
OPTIONS = {"vector-walk": {"exact_search_below": 0}, "vector-one": {"exact_search_below": 1}}


async def _keys(store: Any) -> list[str]:
    return await listed(store.keys())


# (store, privilege, table, what the store is asked, the words its error must hold)
CASES: list[tuple[str, str, str, Action, str]] = [
    ("kv", "SELECT", "schema", OPEN, "failed to read the schema"),
    ("kv", "SELECT", "kv", lambda s: s.count(), "failed to count records"),
    ("kv", "SELECT", "kv", _keys, "failed to list records"),
    ("kv", "SELECT", "kv", lambda s: s.get_many(["a"]), "failed to read records"),
    ("kv", "INSERT", "kv", lambda s: s.upsert({"b": {"text": "new words"}}), "failed to write records"),
    ("kv", "DELETE", "kv_text_filled", lambda s: s.upsert({"b": {"text": "new"}}), "failed to write records"),
    ("kv", "DELETE", "kv", lambda s: s.delete(["a"]), "failed to delete records"),
    ("kv", "DELETE", "kv", lambda s: s.drop(), "failed to drop"),
    ("kv-text", "SELECT", "kv_text_filled", OPEN, "failed to read the text index's state"),
    ("kv-text", "UPDATE", "kv", OPEN, "failed to index records' words"),
    ("kv-text", "INSERT", "kv_text_filled", OPEN, "failed to record the text index's state"),
    ("kv-indexed", "SELECT", "kv", lambda s: s.search_text("words", 3), "failed to search records' words"),
    ("doc_status", "SELECT", "doc_status", lambda s: s.get(["d1"]), "failed to read status records"),
    ("doc_status", "INSERT", "doc_status", lambda s: s.upsert([pending("d2")]), "failed to write status records"),
    ("doc_status", "DELETE", "doc_status", lambda s: s.delete(["d1"]), "failed to delete status records"),
    ("doc_status", "DELETE", "doc_status", lambda s: s.drop(), "failed to drop"),
    ("doc_status", "UPDATE", "doc_status", lambda s: s.transition("d1", DocStatus.PROCESSING),
     "failed to change a document's status"),
    ("doc_status", "SELECT", "doc_status", lambda s: s.counts(), "failed to count documents"),
    ("doc_status", "SELECT", "doc_status", lambda s: s.list_page(None, 10), "failed to list documents"),
    ("doc_status", "SELECT", "doc_status_gen", lambda s: s.generation(), "failed to read the generation"),
    ("doc_status", "SELECT", "doc_status_gone", lambda s: s.changes_since(0), "failed to read the changes"),
    ("graph", "INSERT", "nodes", lambda s: s.upsert_nodes({"x": {}}), "failed to write nodes"),
    ("graph", "INSERT", "edges", lambda s: s.upsert_edges([("x", "y", {})]), "failed to write edges"),
    ("graph", "DELETE", "edges", lambda s: s.delete_nodes(["n1"]), "failed to delete nodes"),
    ("graph", "DELETE", "edges", lambda s: s.delete_edges([("n1", "n2")]), "failed to delete edges"),
    ("graph", "DELETE", "nodes", lambda s: s.drop(), "failed to drop"),
    ("graph", "SELECT", "nodes", lambda s: s.get_nodes(["n1"]), "failed to read nodes"),
    ("graph", "SELECT", "edges", lambda s: s.get_edges([("n1", "n2")]), "failed to read edges"),
    ("graph", "SELECT", "edges", lambda s: s.nodes_edges(["n1"]), "failed to read a neighbourhood"),
    ("graph", "SELECT", "nodes", lambda s: s.context(["n1"]), "failed to read a neighbourhood"),
    ("graph", "SELECT", "edges", lambda s: s.degrees(["n1"]), "failed to count degrees"),
    ("graph", "SELECT", "nodes", lambda s: s.node_count(), "failed to count nodes"),
    ("graph", "SELECT", "edges", lambda s: s.edge_count(), "failed to count edges"),
    ("graph", "SELECT", "nodes", lambda s: listed(s.nodes()), "failed to list records"),
    ("graph", "SELECT", "edges", lambda s: listed(s.edges()), "failed to list edges"),
    ("graph", "SELECT", "nodes", lambda s: s.labels(), "failed to list node ids"),
    ("vector", "SELECT", "vector_stores", OPEN, "failed to read the vector store's embedder"),
    ("vector", "INSERT", "vectors_4", lambda s: s.upsert(["v2"], np.ones((1, 4))), "failed to write vectors"),
    ("vector", "SELECT", "vectors_4", lambda s: s.query(np.ones(4), 3), "failed to count vectors"),
    ("vector-walk", "SELECT", "vectors_4", lambda s: s.query(np.ones(4), 3), "failed to search vectors"),
    ("vector-one", "SELECT", "vectors_4", lambda s: s.query(np.ones(4), 3), "failed to count vectors"),
    ("vector", "SELECT", "vectors_4", lambda s: s.get(["v1"]), "failed to read vectors"),
    ("vector", "SELECT", "vectors_4", lambda s: s.count(), "failed to count records"),
    ("vector", "DELETE", "vectors_4", lambda s: s.delete(["v1"]), "failed to delete records"),
    ("vector", "DELETE", "vectors_4", lambda s: s.drop(), "failed to drop"),
    ("doc_status", "INSERT", "writer", lambda s: s.writer_lease().acquire(Holder(), 30), "failed to take the writer lock"),
    ("doc_status", "SELECT", "writer", lambda s: s.writer_lease().holder(), "failed to read the writer lock"),
    ("doc_status", "DELETE", "writer", lambda s: _take_and_release(s.writer_lease()), "failed to release the writer lock"),
]


async def _take_and_release(lease: Any) -> None:
    me = Holder()
    assert await lease.acquire(me, 30)
    await lease.release(me)


SEEDS: dict[str, Action] = {
    "kv": lambda s: s.upsert({"a": {"text": "old words"}}),  # no terms: an open with a text field indexes it
    "doc_status": lambda s: s.upsert([pending("d1")]),
    "graph": lambda s: s.upsert_edges([("n1", "n2", {"w": 1})]),
    "vector": lambda s: s.upsert(["v1"], np.ones((1, 4))),
}
SEEDS["kv-text"], SEEDS["kv-indexed"] = SEEDS["kv"], SEEDS["kv"]
SEEDS["vector-walk"] = SEEDS["vector-one"] = SEEDS["vector"]


@asynccontextmanager
async def _role(postgres_url: str, prefix: str) -> AsyncIterator[tuple[str, Any]]:
    """A login role (with an admin connection to grant and revoke for it);
    afterwards the role and every table of ``prefix`` are dropped."""
    role = f"ragkit_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
        yield role, admin
    finally:
        await drop_prefix(postgres_url, prefix)
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


async def _grant_tables(admin: Any, prefix: str, role: str) -> None:
    tables = [r[0] for r in await admin.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE $1",
                                              f"{prefix}\\_%")]
    await admin.execute(f"GRANT ALL ON {', '.join(tables)} TO {role}")


def _as(config: StoreConfig, postgres_url: str, role: str, **options: Any) -> StoreConfig:
    return config.model_copy(update={"options": {**config.options, **options, "dsn": as_user(postgres_url, role)}})


@pytest.mark.parametrize(("kind", "privilege", "table", "action", "words"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[4].removeprefix('failed to ')}" for c in CASES])
async def test_a_refused_statement_names_the_operation_and_hides_the_password(
    make_config, postgres_url, kind, privilege, table, action, words
):
    prefix = fresh_prefix()
    config: StoreConfig = make_config("errs", dimension=4, table_prefix=prefix)
    async with _role(postgres_url, prefix) as (role, admin):
        # The tables, and what the actions find there (kept: the tables are dropped at the end).
        # "kv-indexed": written by a store with a text field, so opening one reads no records.
        seed = STORES[kind](config.model_copy(update={"text_field": "text" if kind == "kv-indexed" else None}))
        await seed.open()
        try:
            await SEEDS[kind](seed)
        finally:
            await seed.close()
        await _grant_tables(admin, prefix, role)
        await admin.execute(f"REVOKE {privilege} ON {prefix}_{table} FROM {role}")
        text_field = "text" if kind in ("kv-text", "kv-indexed") else None
        store = STORES[kind](_as(config, postgres_url, role, **OPTIONS.get(kind, {})).model_copy(
            update={"text_field": text_field}))
        message = await refusal(store, action)
    check_refusal(message, words, role)
    assert "permission denied" in message, message


async def test_a_vector_table_the_role_may_not_create_is_named(make_config, postgres_url):
    """A store of a dimension no table holds yet creates that table when it
    opens; a role that may not create tables gets an error naming the table's
    dimension (PostgreSQL 15 on: no role may create in ``public`` unless granted)."""
    prefix = fresh_prefix()
    config: StoreConfig = make_config("errs", dimension=7, table_prefix=prefix)
    async with _role(postgres_url, prefix) as (role, admin):
        async with PostgresKVStore(config.model_copy(update={"dimension": None})):
            pass  # the schema's tables, made by a role that may
        await _grant_tables(admin, prefix, role)
        await admin.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}, PUBLIC")
        message = await refusal(PostgresVectorStore(_as(config, postgres_url, role)), OPEN)
    check_refusal(message, "failed to find or create the table of 7-dimension vectors", role)
    assert "permission denied for schema public" in message, message


async def test_a_schema_the_role_may_not_create_is_named(make_config, postgres_url):
    """The first store opened on a fresh table prefix creates the schema; a
    role that may not create tables gets an error saying so."""
    prefix = fresh_prefix()
    config: StoreConfig = make_config("errs", table_prefix=prefix)
    async with _role(postgres_url, prefix) as (role, admin):
        await admin.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}, PUBLIC")
        message = await refusal(PostgresKVStore(_as(config, postgres_url, role)), OPEN)
    check_refusal(message, "failed to create the schema", role)
    assert "permission denied for schema public" in message, message


async def test_stores_opened_at_once_where_the_schema_is_refused_each_get_the_error(make_config, postgres_url):
    """Three stores of a fresh prefix wait for the first one's open; its
    schema is refused and its pool closed, and each of the others tries
    again and is refused the same way (none is handed the closed pool).

    Troubleshoot: ``Database._connect``'s clean-up (``pool`` back to None).
    """
    prefix = fresh_prefix()
    config: StoreConfig = make_config("errs", table_prefix=prefix)
    async with _role(postgres_url, prefix) as (role, admin):
        await admin.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}, PUBLIC")
        stores = [PostgresKVStore(_as(config, postgres_url, role)) for _ in range(3)]
        errors = await asyncio.gather(*(s.open() for s in stores), return_exceptions=True)
    assert [type(e) for e in errors] == [StoreError] * 3, errors
    assert all("failed to create the schema" in str(e) for e in errors), errors
    assert not any(s.is_open for s in stores)
