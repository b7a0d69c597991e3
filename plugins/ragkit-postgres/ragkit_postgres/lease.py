"""The workspace's writer lock as a PostgreSQL advisory lock (rules:
:mod:`ragkit.protocols.lease`).

``pg_try_advisory_lock`` on a connection of the lease's own (never one of
the pool): a session lock, held until released or until that session ends.
So a holder that dies (``kill -9``, a lost machine) frees it as soon as the
server notices the connection is gone, with no expiry to tune, and a holder
that merely stalls keeps it (no heartbeat, like an OS file lock). The holder's
JSON is kept beside it in ``<prefix>_writer`` with the session's backend pid,
so a waiter names who holds it; a row whose session no longer holds an
advisory lock is stale and ignored.

Fencing: ``renew`` asks the server whether this session still holds the lock
(``pg_locks``); a lease whose connection broke (server restart, idle timeout,
an administrator's ``pg_terminate_backend``) says False from then on, so the
writer lock's fence stops every further write of its holder.

Time limits: the store's ``connect_timeout`` and ``command_timeout`` bound the
lease's connections and statements as they bound the pool's, so a server that
stops answering is an error (a renewal: the lease lost) rather than a writer
waiting forever at its fence.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ragkit.protocols.lease import Holder

from ragkit_postgres._db import errors, safe_dsn

if TYPE_CHECKING:
    from ragkit_postgres._db import PostgresStore

_KEY = "SELECT hashtext($1)::int, hashtext($2)::int"


class PostgresLease:
    heartbeat = False

    def __init__(self, store: PostgresStore) -> None:
        self.dsn = store.options.dsn
        self.connect_timeout, self.command_timeout = store.options.connect_timeout, store.options.command_timeout
        self.workspace = store.workspace
        self.table = store.table("writer")
        self.where = f"PostgreSQL {safe_dsn(self.dsn)}, advisory lock of workspace {store.workspace!r}"
        self._name = (f"ragkit-writer:{store.options.table_prefix}", store.workspace)
        self._conn: Any = None
        self._holder: Holder | None = None
        self._busy = asyncio.Lock()  # one statement at a time on the session (concurrent writes all renew)

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        if self._holder is not None:  # one session holds the lock once (advisory locks stack per session)
            return False
        try:
            async with self._busy:
                if self._conn is None or self._conn.is_closed():
                    self._conn = await self._connect("take the writer lock")
                async with errors(self.where, "take the writer lock", self.command_timeout):
                    taken = await self._conn.fetchval(
                        f"SELECT pg_try_advisory_lock(k1, k2) FROM ({_KEY}) AS k(k1, k2)", *self._name
                    )
                    if not taken:
                        return False
                    await self._conn.execute(
                        f"INSERT INTO {self.table} (workspace, holder, backend_pid) VALUES ($1, $2, pg_backend_pid()) "
                        "ON CONFLICT (workspace) DO UPDATE SET holder = excluded.holder, "
                        "backend_pid = excluded.backend_pid",
                        self.workspace, holder.encode().decode(),
                    )
        except BaseException:
            await self._drop_connection()  # never keep a lock nobody knows it holds
            raise
        self._holder = holder
        return True

    async def holder(self) -> Holder | None:
        what = "read the writer lock"
        async with self._session(what) as conn, errors(self.where, what, self.command_timeout):
            found = await conn.fetchval(
                f"SELECT w.holder FROM {self.table} w WHERE w.workspace = $1 AND EXISTS (SELECT 1 FROM pg_locks l "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.pid = w.backend_pid)", self.workspace,
            )
        return Holder.decode(found)

    async def renew(self, holder: Holder, ttl: float) -> bool:
        if self._holder is None or self._holder.token != holder.token or self._conn is None:
            return False
        try:
            async with self._busy:
                held = await self._conn.fetchval(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND pid = pg_backend_pid())"
                )
        except Exception:  # the session is gone (or silent past command_timeout): lost for good
            held = False
        if not held:
            self._holder = None
            await self._drop_connection()
        return bool(held)

    async def release(self, holder: Holder) -> None:
        if self._holder is None or self._holder.token != holder.token:
            return
        self._holder = None
        conn = self._conn
        try:
            async with errors(self.where, "release the writer lock", self.command_timeout):
                await conn.execute(f"DELETE FROM {self.table} WHERE workspace = $1 AND backend_pid = pg_backend_pid()",
                                   self.workspace)
        finally:
            # Closing the session releases its advisory lock whatever happened above.
            await self._drop_connection()

    @asynccontextmanager
    async def _session(self, what: str) -> AsyncIterator[Any]:
        """The lease's own connection when it has one, else a short one: the
        lease works whether or not its store is open."""
        if self._conn is not None and not self._conn.is_closed():
            async with self._busy:
                yield self._conn
            return
        conn = await self._connect(what)
        try:
            yield conn
        finally:
            await conn.close()

    async def _connect(self, what: str) -> Any:
        """A session of the lease's own, with the store's time limits (a connect that
        times out is named as such, not as a statement cancelled by command_timeout)."""
        import asyncpg

        async with errors(self.where, what):
            return await asyncpg.connect(self.dsn, timeout=self.connect_timeout, command_timeout=self.command_timeout)

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=5)
            except Exception:
                conn.terminate()
