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

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlparse

import asyncpg
import pytest

from ragkit.errors import StoreError
from ragkit.protocols import StoreConfig
from ragkit.schema import DocStatus, DocStatusRecord
from ragkit_postgres import PostgresDocStatusStore, PostgresKVStore
from ragkit_postgres.testing import drop_prefix, fresh_prefix

T0 = datetime(2024, 1, 2, tzinfo=timezone.utc)
PASSWORD = "s3cret-pw"
STORES = {"kv": PostgresKVStore, "kv-text": PostgresKVStore, "doc_status": PostgresDocStatusStore}


def _doc(id: str) -> DocStatusRecord:
    return DocStatusRecord(id=id, status=DocStatus.PENDING, created_at=T0, updated_at=T0)


async def _keys(store: Any) -> list[str]:
    return [k async for k in store.keys()]


Action = Callable[[Any], Awaitable[object]]


async def OPEN(store: Any) -> None:
    await store.open()


# (store, privilege, table, what the store is asked, the words its error must hold)
CASES: list[tuple[str, str, str, Action, str]] = [
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
    ("doc_status", "SELECT", "doc_status", lambda s: s.get(["d1"]), "failed to read status records"),
    ("doc_status", "INSERT", "doc_status", lambda s: s.upsert([_doc("d2")]), "failed to write status records"),
    ("doc_status", "DELETE", "doc_status", lambda s: s.delete(["d1"]), "failed to delete status records"),
    ("doc_status", "DELETE", "doc_status", lambda s: s.drop(), "failed to drop"),
    ("doc_status", "UPDATE", "doc_status", lambda s: s.transition("d1", DocStatus.PROCESSING),
     "failed to change a document's status"),
    ("doc_status", "SELECT", "doc_status", lambda s: s.counts(), "failed to count documents"),
    ("doc_status", "SELECT", "doc_status", lambda s: s.list_page(None, 10), "failed to list documents"),
    ("doc_status", "SELECT", "doc_status_gen", lambda s: s.generation(), "failed to read the generation"),
    ("doc_status", "SELECT", "doc_status_gone", lambda s: s.changes_since(0), "failed to read the changes"),
]


@pytest.mark.parametrize(("kind", "privilege", "table", "action", "words"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[4].removeprefix('failed to ')}" for c in CASES])
async def test_a_refused_statement_names_the_operation_and_hides_the_password(
    make_config, postgres_url, kind, privilege, table, action, words
):
    prefix, role = fresh_prefix(), f"ragkit_{uuid.uuid4().hex[:8]}"
    config: StoreConfig = make_config("errs", table_prefix=prefix)
    admin = await asyncpg.connect(postgres_url)
    try:
        # The tables, and what the actions find there (kept: the tables are dropped at the end).
        seed = (PostgresDocStatusStore if kind == "doc_status" else PostgresKVStore)(config)
        await seed.open()
        try:
            if kind == "doc_status":
                await seed.upsert([_doc("d1")])
            else:  # a row without terms: an open with a text field has it to index
                await seed.upsert({"a": {"text": "old words"}})
        finally:
            await seed.close()
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
        tables = [r[0] for r in await admin.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE $1",
                                                  f"{prefix}\\_%")]
        await admin.execute(f"GRANT ALL ON {', '.join(tables)} TO {role}")
        await admin.execute(f"REVOKE {privilege} ON {prefix}_{table} FROM {role}")
        url = urlparse(postgres_url)
        dsn = url._replace(netloc=f"{role}:{PASSWORD}@{url.hostname}:{url.port}").geturl()
        text_field = "text" if kind == "kv-text" else None
        store = STORES[kind](config.model_copy(update={"options": {**config.options, "dsn": dsn},
                                                       "text_field": text_field}))
        try:
            if action is not OPEN:
                await store.open()
            with pytest.raises(StoreError) as caught:
                await action(store)
        finally:
            await store.close()
        message = str(caught.value)
        assert words in message and "permission denied" in message, message
        assert PASSWORD not in message and f"{role}:****@" in message, message
    finally:
        await drop_prefix(postgres_url, prefix)
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()
