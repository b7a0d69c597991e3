"""SQLite plumbing shared by the embedded KV and doc-status stores.

One database file per workspace (``<working_dir>/<workspace>/ragkit.sqlite``)
holds every SQLite-backed namespace; each store opens its own connection.
Rows carry their workspace and namespace, so an explicit shared ``path`` still
keeps workspaces apart.

Connections run in autocommit mode and every write is one explicit
``BEGIN IMMEDIATE ... COMMIT`` transaction, committed before the store method
returns. The journal is WAL: with ``synchronous=NORMAL`` a committed
transaction survives a crash of the process (``kill -9``); ``FULL`` also
survives a power loss at some cost in write speed.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from ragkit.errors import ConfigError, StoreError
from ragkit.protocols.base import StoreConfig

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


def chunked(items: Sequence[Any], size: int = MAX_PARAMS) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def bindable(key: object) -> bool:
    """A str that SQLite can bind as TEXT (lone surrogates cannot be encoded as UTF-8)."""
    if not isinstance(key, str):
        return False
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Connection:
    """One sqlite3 connection with WAL pragmas and explicit transactions.

    Methods run synchronously; a lock makes the connection safe to use from a
    worker thread as well as from the event loop's thread.
    """

    def __init__(self, path: Path, synchronous: str = "NORMAL") -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._lock = threading.RLock()
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
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
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE``; commit on success, roll back on any error."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self._lock:
            return self._conn.execute(sql, params).fetchone()

    def script(self, sql: str) -> None:
        with self.transaction() as conn:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
