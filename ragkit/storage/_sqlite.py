"""SQLite plumbing shared by the embedded KV and doc-status stores, and
``SQLiteStore``, their common base: one table each, keyed by workspace,
namespace and a text key.

One database file per workspace (``<working_dir>/<workspace>/ragkit.sqlite``)
holds every SQLite-backed namespace; each store opens its own connection.
Rows carry their workspace and namespace, so an explicit shared ``path`` still
keeps workspaces apart.

Connections run in autocommit mode and every write is one explicit
``BEGIN IMMEDIATE ... COMMIT`` transaction, committed before the store method
returns. The stores' statements run in a worker thread of their connection's
own (one thread: they run in the order they were called, as they did on the
loop): reading or writing thousands of rows is milliseconds to seconds during
which the event loop would answer nothing, while sqlite3 releases the GIL as
it steps through a statement. The journal is WAL: with ``synchronous=NORMAL`` a committed
transaction survives a crash of the process (``kill -9``); ``FULL`` also
survives a power loss at some cost in write speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, field_validator

from ragkit.core.files import private_dir
from ragkit.errors import ConfigError, StoreError
from ragkit.protocols.base import BaseStore, Capability, StoreConfig
from ragkit.storage.snapshot_journal import _in_thread

T = TypeVar("T")

DB_FILENAME = "ragkit.sqlite"

# Bound parameters per statement stay well under SQLITE_MAX_VARIABLE_NUMBER
# (999 on SQLite builds before 3.32, 32766 after).
MAX_PARAMS = 900

BUSY_TIMEOUT_MS = 10_000


class SQLiteOptions(BaseModel):
    """``[kv.options]`` / ``[doc_status.options]`` of the ``sqlite`` adapters."""

    model_config = ConfigDict(extra="forbid")

    synchronous: Literal["FULL", "NORMAL"] = "NORMAL"
    """SQLite ``PRAGMA synchronous``: NORMAL survives process crashes, FULL also
    power loss."""
    path: Path | None = None
    """Database file to use instead of ``<working_dir>/<workspace>/ragkit.sqlite``;
    a relative path is taken relative to ``working_dir``."""

    @field_validator("synchronous", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


def database_path(config: StoreConfig, options: SQLiteOptions) -> Path:
    if options.path is not None:
        path = Path(options.path).expanduser()
        return path if path.is_absolute() else Path(config.working_dir) / path
    return Path(config.working_dir) / config.workspace / DB_FILENAME


def key_bytes(text: str) -> bytes:
    """A key as UTF-8 bytes: SQLite compares BLOBs by their bytes, which is
    code point order, the order of Python's ``str`` comparison. The protocols
    let no lone surrogate reach a store ([graph.text.unicode])."""
    return text.encode("utf-8")


def key_text(data: bytes) -> str:
    """A stored key; lone surrogates passed through: databases written before
    [graph.text.unicode] may hold them, and still open."""
    return bytes(data).decode("utf-8", "surrogatepass")


def json_bytes(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes (no NaN)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def json_value(data: bytes) -> Any:
    """A stored JSON value (lone surrogates passed through, as in ``key_text``)."""
    return json.loads(bytes(data).decode("utf-8", "surrogatepass"))


def chunked(items: Sequence[Any], size: int = MAX_PARAMS) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _use_wal(conn: sqlite3.Connection) -> str:
    """Put the database in WAL mode; the journal mode it is in afterwards.

    SQLite runs no busy handler for the conversion (it needs the file to
    itself), so two processes opening a new database at once made one fail
    at once with "database is locked" (two ``ragkit index`` started together,
    seen in CI). WAL is recorded in the file: once converted, reading the mode
    takes no lock; until then the conversion is tried again, backing off,
    within the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.002
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
            if mode.lower() == "wal":
                return mode
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


class Connection:
    """One sqlite3 connection with WAL pragmas and explicit transactions.

    Methods run synchronously; a lock makes the connection safe to use from a
    worker thread as well as from the event loop's thread. ``run`` runs one in
    the connection's worker thread.
    """

    def __init__(self, path: Path, synchronous: str) -> None:
        self.path = Path(path)
        try:
            private_dir(self.path.parent)
            self._conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._lock = threading.RLock()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ragkit-sqlite")
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            with self._errors():
                mode = _use_wal(self._conn)
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"SQLite database {self.path} refused WAL journal mode (got {mode!r}); "
                    "put the working_dir on a local filesystem"
                )
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
        except BaseException:
            self._conn.close()
            raise

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's errors as ``StoreError`` naming the database and the fix.
        Why: a full disk (``SQLITE_FULL``, or "disk I/O error" when the WAL
        cannot grow) must reach the user as a message, not as a traceback
        (found by the fault campaign, docs/faults.md)."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise self._failed(exc) from exc
            raise StoreError(
                f"SQLite database {self.path} stayed locked by another connection for "
                f"{BUSY_TIMEOUT_MS / 1000:g} s ({exc}); run the command again when the other process "
                "has finished: what was committed before is intact"
            ) from exc
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: sqlite3.Error) -> StoreError:
        # A damaged file is not fixed by freeing space: say which of the two it is.
        if getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
            return StoreError(
                f"SQLite database {self.path} is damaged or not a database ({exc}); restore it from a "
                "backup, or move it away and index the documents again"
            )
        return StoreError(
            f"SQLite database {self.path} failed: {exc}. If its disk is full, free space and run "
            "the command again: what was committed before is intact and the next run finishes the rest"
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE``; commit on success, roll back on any error."""
        with self._lock, self._errors():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._errors():
            return self._conn.execute(sql, params).fetchall()

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self._lock, self._errors():
            return self._conn.execute(sql, params).fetchone()

    def script(self, sql: str) -> None:
        with self.transaction() as conn:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the connection's thread, in call order; waited for
        even if the caller is cancelled (a statement cannot be stopped)."""
        loop = asyncio.get_running_loop()
        return await _in_thread(lambda: fn(*args), lambda call: loop.run_in_executor(self._thread, call))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        self._thread.shutdown(wait=False)


class SQLiteStore(BaseStore):
    """Base of the SQLite stores: the connection's lifecycle and the statements
    on ``table`` that do not depend on what its rows hold.

    Every write is one committed transaction when it returns, so ``flush()`` has
    nothing to do and a killed process loses no returned write.
    """

    name: ClassVar[str] = "sqlite"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.TRANSACTIONAL, Capability.CONCURRENT_WRITES}
    )
    Options: ClassVar[type[SQLiteOptions]] = SQLiteOptions
    table: ClassVar[str]
    """The table; rows are keyed by (workspace, namespace, ``key``)."""
    key: ClassVar[str]
    """The key column."""
    schema: ClassVar[str]
    """``CREATE ... IF NOT EXISTS`` statements, run at ``open()``."""

    options: SQLiteOptions

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self._db: Connection | None = None

    @property
    def path(self) -> Path:
        """The database file."""
        return database_path(self.config, self.options)

    @property
    def db(self) -> Connection:
        assert self._db is not None, "the store is open, so it has a connection"
        return self._db

    def _where(self, sql: str = "") -> str:
        return f"FROM {self.table} WHERE workspace = ? AND namespace = ?{sql}"

    @property
    def _scope(self) -> tuple[str, str]:
        return (self.workspace, self.namespace)

    async def _open(self) -> None:
        db = Connection(self.path, self.options.synchronous)
        try:
            db.script(self.schema)
        except BaseException:
            db.close()
            raise
        self._db = db

    async def _close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    async def _drop(self) -> None:
        def drop() -> None:
            with self.db.transaction() as conn:
                conn.execute(f"DELETE {self._where()}", self._scope)
                self.wrote(conn)

        await self.db.run(drop)

    async def _delete(self, keys: list[str]) -> None:
        def delete() -> None:
            with self.db.transaction() as conn:
                for part in chunked(keys):
                    marks = ",".join("?" * len(part))
                    conn.execute(f"DELETE {self._where(f' AND {self.key} IN ({marks})')}", (*self._scope, *part))
                self.wrote(conn)

        await self.db.run(delete)

    async def select(self, column: str, keys: list[str]) -> dict[str, Any]:
        """``{key: column}`` of the stored rows among ``keys``."""

        def select() -> dict[str, Any]:
            found: dict[str, Any] = {}
            for part in chunked(keys):
                marks = ",".join("?" * len(part))
                found.update(
                    self.db.fetchall(
                        f"SELECT {self.key}, {column} {self._where(f' AND {self.key} IN ({marks})')}",
                        (*self._scope, *part),
                    )
                )
            return found

        return await self.db.run(select)

    async def page(
        self, column: str, after: str | None, limit: int, sql: str = "", params: Sequence[Any] = ()
    ) -> list[Any]:
        """``column`` of up to ``limit`` rows (matching ``sql``) with keys after
        ``after``, in key order. Keyset pagination: no cursor is held between
        pages, so a row present for the whole scan is seen exactly once even
        while other tasks write."""
        if after is not None:
            sql, params = f"{sql} AND {self.key} > ?", (*params, after)
        rows = await self.db.run(
            self.db.fetchall,
            f"SELECT {column} {self._where(sql)} ORDER BY {self.key} LIMIT ?",
            (*self._scope, *params, limit),
        )
        return [value for (value,) in rows]

    async def write(self, sql: str, rows: list[tuple[Any, ...]], *then: tuple[str, tuple[Any, ...]]) -> None:
        """``sql`` for each row, then each ``(statement, params)`` of ``then``,
        in one transaction."""

        def write() -> None:
            with self.db.transaction() as conn:
                conn.executemany(sql, rows)
                for statement, params in then:
                    conn.execute(statement, params)
                self.wrote(conn)

        await self.db.run(write)

    def wrote(self, conn: sqlite3.Connection) -> None:
        """Runs inside every write's transaction, after its statements: a store
        that keeps something per write (the doc-status generation) adds it here,
        so it commits or rolls back with the write. It runs in the
        connection's thread."""
