"""A store opened as a server user denied one privilege: what its error says.

A server plugin's error tests open a store with the credentials of a user the
server refuses one command or one table (a Redis ACL, a PostgreSQL
``REVOKE``), ask the store for what needs it, and check the ``StoreError``:
it names the operation, and shows the user with the password masked. What a
user reads is the only clue to which call failed when one of many concurrent
writes does. This module is the part those tests share; the cases (which
privilege, which call, which words) are each plugin's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlparse

from ragkit.errors import StoreError
from ragkit.schema import DocStatus, DocStatusRecord

Action = Callable[[Any], Awaitable[object]]
"""What a case asks of the store."""
PASSWORD = "s3cret-pw"
T0 = datetime(2024, 1, 2, tzinfo=timezone.utc)


async def OPEN(store: Any) -> None:
    """The action of a case whose refused command is one ``open()`` sends."""
    await store.open()


async def listed(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


def pending(id: str) -> DocStatusRecord:
    return DocStatusRecord(id=id, status=DocStatus.PENDING, created_at=T0, updated_at=T0)


def as_user(url: str, user: str, password: str = PASSWORD) -> str:
    """``url`` with ``user:password@`` in place of its credentials."""
    parts = urlparse(url)
    return parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port}").geturl()


async def refusal(store: Any, action: Action) -> str:
    """The message of the ``StoreError`` ``action`` raises on ``store``
    (opened first, unless the action is ``OPEN``); the store is closed after."""
    try:
        if action is not OPEN:
            await store.open()
        try:
            await action(store)
        except StoreError as error:
            return str(error)
        raise AssertionError(f"{action} succeeded as a user denied what it needs")
    finally:
        if store.is_open:
            await store.close()


def check_refusal(message: str, words: str, user: str, password: str = PASSWORD) -> None:
    """The error names the operation (``words``) and the user, never the password."""
    assert words in message, message
    assert f"{user}:****@" in message and password not in message, message
