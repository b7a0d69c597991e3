"""What every PostgreSQL store shares: options, one asyncpg pool per DSN (and
event loop), the schema and its version, the batch transaction, and error
translation.

Tables (``<prefix>`` defaults to ``ragkit``; every row carries its workspace
and namespace, so one database holds any number of workspaces)::

    <prefix>_schema          component -> schema version (one row)
    <prefix>_kv              KV records (JSON text)
    <prefix>_doc_status      status records, the generation of each row's last write
    <prefix>_doc_status_gen  the generation counter per workspace and namespace
    <prefix>_doc_status_gone tombstones of deleted ids (the change feed)
    <prefix>_vectors_<dim>   vectors of one dimension (pgvector); metadata as JSON text
                             (read back exactly) and jsonb (filtered in SQL)
    <prefix>_vector_stores   the dimension and embedder each vector store holds
    <prefix>_nodes           graph nodes (properties as JSON text)
    <prefix>_edges           graph edges, canonical (a <= b)
    <prefix>_writer          who holds each workspace's writer lock

Ids are ``text COLLATE "C"``: compared and ordered code point by code point,
never by a locale's collation. Every value is a bound parameter; table names
come only from the validated prefix (and a vector dimension, an int).

The batch transaction (``ragkit.protocols.TransactionScope``): stores of one
DSN return the same ``Database`` from ``transaction_scope()``; inside
``async with db.transaction():`` every statement of those stores, in this task
and the tasks it starts, runs on one connection in one transaction (one at a
time: asyncpg runs one statement per connection), so a commit batch of the
indexer lands whole or not at all, also when the process is killed.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit.errors import StoreError
from ragkit.protocols.base import BaseStore
from ragkit_postgres._stats import Statistics

SCHEMA_VERSION = 2
"""The schema this code writes; a database recording a larger one is refused.
2: the KV table's search terms (``terms``, ``term_count``) and their index."""
COMPONENT = "ragkit-postgres"
_PREFIX = re.compile(r"^[a-z][a-z0-9_]{0,29}$")
HALFVEC_ABOVE = 2000
"""pgvector's HNSW index takes ``vector`` up to 2,000 dimensions; above, the index is on ``halfvec``."""


class PostgresOptions(BaseModel):
    """``[kind.options]`` of every ``postgres`` store."""

    model_config = ConfigDict(extra="forbid")

    dsn: str = "postgresql://postgres@localhost:5432/postgres"
    """``postgresql://user:password@host:port/database`` (``?host=/socket/dir`` for a Unix socket)."""
    table_prefix: str = "ragkit"
    """First part of every table name: lower-case letters, digits and ``_``, starting with a letter."""
    min_connections: int = Field(default=1, ge=0)
    max_connections: int = Field(default=10, ge=1)
    command_timeout: float | None = Field(default=60.0, gt=0)
    """Seconds a statement may run (or wait for a lock) before it is cancelled; None: no limit."""
    connect_timeout: float = Field(default=60.0, gt=0)
    """Seconds to wait for the server to answer a new connection (asyncpg's
    ``timeout``; it does not read ``connect_timeout`` from the dsn)."""
    batch_size: int = Field(default=1000, ge=1, le=100_000)
    """Rows per page of scans."""
    hnsw_m: int = Field(default=16, ge=2, le=100)
    hnsw_ef_construction: int = Field(default=64, ge=4, le=1000)
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    """Candidates the HNSW index search keeps; 1000 makes small collections exact."""
    exact_search_below: int = Field(default=2000, ge=0)
    """A vector store holding fewer rows is searched exactly (every row scored)
    rather than through the HNSW index it shares with every store of its
    dimension; 0 always walks the index."""

    @field_validator("table_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not _PREFIX.fullmatch(value):
            raise ValueError(f"use 1-30 lower-case letters, digits or '_', starting with a letter, got {value!r}")
        return value

    @field_validator("dsn")
    @classmethod
    def _dsn(cls, value: str) -> str:
        if urlparse(value).scheme not in ("postgres", "postgresql"):
            raise ValueError("the dsn must start with postgresql:// (e.g. postgresql://user@host:5432/db)")
        return value

    def pool_key(self) -> tuple[Any, ...]:
        return (self.dsn, self.min_connections, self.max_connections, self.command_timeout, self.connect_timeout)


_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def safe_dsn(dsn: str) -> str:
    """The DSN for messages: the password hidden, in the user part and in a
    ``password`` query parameter (asyncpg and libpq take either), every time
    it is written."""
    parsed = urlparse(dsn)
    if parsed.password:
        dsn = dsn.replace(f":{parsed.password}@", ":****@")
    return _QUERY_PASSWORD.sub(r"\1****", dsn)


@dataclass
class _Transaction:
    conn: Any
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    before_commit: dict[Any, Callable[[Any], Awaitable[None]]] = field(default_factory=dict)
    """Run last, in order, on the transaction's connection: work that takes a
    hot lock (the doc-status generation row) holds it only until the commit."""


_CURRENT: contextvars.ContextVar[dict[int, _Transaction] | None] = contextvars.ContextVar(
    "ragkit_postgres_transaction", default=None
)


class Database:
    """One pool of one DSN in one event loop, shared by every store opened on
    it (counted: the last store to close closes the pool)."""

    _shared: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Database]]] = (
        weakref.WeakKeyDictionary()
    )
    """Per event loop (a pool belongs to the loop it was made in), per DSN and pool options."""

    def __init__(self, options: PostgresOptions, key: tuple[Any, ...]) -> None:
        self.options = options
        self.key = key
        self.where = f"PostgreSQL {safe_dsn(options.dsn)}"
        self.pool: Any = None
        self.users = 0
        self.vector_version: tuple[int, ...] = ()
        self._ready_tables: set[str] = set()
        self._opening = asyncio.Lock()
        self.stats = Statistics()
        """Rows written per table; tables that doubled are analysed after the commit (``_stats``)."""

    # -- sharing -------------------------------------------------------------------

    @classmethod
    async def attach(cls, options: PostgresOptions) -> Database:
        key = (*options.pool_key(), options.table_prefix)
        shared = cls._shared.setdefault(asyncio.get_running_loop(), {})
        db = shared.get(key)
        if db is None:
            db = shared[key] = cls(options, key)
        async with db._opening:
            if db.pool is None:
                try:
                    await db._connect()
                except BaseException:
                    shared.pop(key, None)
                    raise
            db.users += 1
        return db

    async def detach(self) -> None:
        self.users -= 1
        if self.users > 0:
            return
        self._shared.get(asyncio.get_running_loop(), {}).pop(self.key, None)
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.close()

    async def _connect(self) -> None:
        import asyncpg

        async with errors(self.where, "connect"):  # no command_timeout: a TimeoutError here is the connect's
            self.pool = await asyncpg.create_pool(
                self.options.dsn, min_size=min(self.options.min_connections, self.options.max_connections),
                max_size=self.options.max_connections, command_timeout=self.options.command_timeout,
                timeout=self.options.connect_timeout, reset=_keep_session, connection_class=_connection_class(),
            )
        try:
            await self._create_schema()
        except BaseException:
            await self.pool.close()
            self.pool = None
            raise

    # -- connections and the batch transaction -------------------------------------

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A connection for one statement or a few: the batch transaction's
        when this task is inside one, else one from the pool."""
        current = self.batch()
        if current is not None:
            async with current.lock:
                yield current.conn
            return
        async with self.pool.acquire() as conn:
            yield conn

    @asynccontextmanager
    async def configured(self, settings: dict[str, str]) -> AsyncIterator[Any]:
        """A connection whose session has ``settings`` (name -> value) for the
        statements run on it here. A pooled connection keeps them for its
        session, set the first time (or when another store's differ), so a
        vector search is one statement, not four (``BEGIN``, ``SET LOCAL``,
        the search, ``COMMIT``). Inside the batch transaction they are set
        local to it: a rollback would revert a session setting while the
        connection still believed it set."""
        current = self.batch()
        if current is not None:
            async with current.lock:
                await current.conn.execute(_set_config(settings, local=True), *settings.values())
                yield current.conn
            return
        async with self.pool.acquire() as conn:
            if conn.session_settings() != settings:
                await conn.execute(_set_config(settings, local=False), *settings.values())
                conn.remember_settings(settings)
            yield conn

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[Any]:
        """A connection inside a transaction: the statements of one write apply
        together (a savepoint inside the batch transaction)."""
        async with self.connection() as conn, conn.transaction():
            yield conn
        if self.batch() is None:  # committed now; a batch refreshes after its own commit
            await self.stats.refresh(self.pool)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """The batch transaction of every store of this database (see the module
        docstring); joins the one this task is already in."""
        current = dict(_CURRENT.get() or {})
        if id(self) in current:
            yield
            return
        async with self.errors("run a batch transaction"):
            async with self.pool.acquire() as conn, conn.transaction():
                current[id(self)] = batch = _Transaction(conn)
                token = _CURRENT.set(current)
                try:
                    yield
                    for finish in list(batch.before_commit.values()):
                        await finish(conn)
                finally:
                    _CURRENT.reset(token)
        await self.stats.refresh(self.pool)

    def batch(self) -> _Transaction | None:
        """The batch transaction this task is in, if any."""
        return (_CURRENT.get() or {}).get(id(self))

    # -- errors ----------------------------------------------------------------------

    def errors(self, what: str):
        return errors(self.where, what, self.options.command_timeout)

    # -- schema ------------------------------------------------------------------------

    def table(self, name: str) -> str:
        return table_name(self.options.table_prefix, name)

    async def _create_schema(self) -> None:
        """Create or upgrade every table, once per database, under a transaction
        advisory lock (two processes opening a fresh database at once)."""
        p = self.options.table_prefix
        if await self._schema_ready(p):
            return
        async with self.errors("create the schema"), self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"ragkit-schema:{p}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {p}_schema (component text PRIMARY KEY, version integer NOT NULL)"
            )
            found = await conn.fetchval(f"SELECT version FROM {p}_schema WHERE component = $1", COMPONENT)
            if found is not None and found > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.where} holds ragkit tables (prefix {p!r}) of schema version {found}, newer than "
                    f"this ragkit-postgres knows ({SCHEMA_VERSION}): upgrade ragkit-postgres "
                    "(pip install -U ragkit-postgres), or use another table_prefix"
                )
            for statement in _schema(p):
                await conn.execute(statement)
            await conn.execute(
                f"INSERT INTO {p}_schema (component, version) VALUES ($1, $2) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                COMPONENT, SCHEMA_VERSION,
            )
            version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            self.vector_version = tuple(int(x) for x in re.findall(r"\d+", version or ""))

    async def _schema_ready(self, p: str) -> bool:
        """Whether every table and index of ``_schema`` exists and the recorded
        version is this one: then opening runs no DDL. ``CREATE INDEX IF NOT
        EXISTS`` takes a SHARE lock on its table before it looks, which waits
        for every open transaction that wrote to the table: an open (a query,
        a server worker) would wait for a writer's batch, or for as long as a
        stalled writer stays stopped."""
        names = [f"{p}_schema", *(m.group(1) for m in map(_CREATED.search, _schema(p)) if m)]
        async with self.errors("read the schema"), self.pool.acquire() as conn:
            missing = await conn.fetchval(
                "SELECT count(*) FROM unnest($1::text[]) AS n WHERE to_regclass(n) IS NULL", names
            )
            version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            if missing or version is None:
                return False
            found = await conn.fetchval(f"SELECT version FROM {p}_schema WHERE component = $1", COMPONENT)
        if found != SCHEMA_VERSION:
            return False  # older: upgrade; newer: refused by the full path
        self.vector_version = tuple(int(x) for x in re.findall(r"\d+", version))
        return True

    async def vector_table(self, dimension: int) -> str:
        """The table of vectors of ``dimension``, with its HNSW index (cosine;
        on a ``halfvec`` cast above 2,000 dimensions), created on first use."""
        name = self.table(f"vectors_{int(dimension)}")
        if name in self._ready_tables:
            return name
        d, o = int(dimension), self.options
        column = f"(embedding::halfvec({d})) halfvec_cosine_ops" if d > HALFVEC_ABOVE else "embedding vector_cosine_ops"
        async with self.errors(f"find or create the table of {d}-dimension vectors"):
            async with self.pool.acquire() as conn:
                # No DDL when both exist: see _schema_ready (the index's DDL waits for writers).
                found = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL",
                                            name, f"{name}_hnsw")
            if not found:
                async with self.pool.acquire() as conn, conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"ragkit-schema:{name}")
                    await conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {name} (workspace text COLLATE \"C\" NOT NULL, "
                        f"namespace text COLLATE \"C\" NOT NULL, id text COLLATE \"C\" NOT NULL, "
                        f"embedding vector({d}) NOT NULL, metadata text NOT NULL, attributes jsonb NOT NULL, "
                        "PRIMARY KEY (workspace, namespace, id))"
                    )
                    await conn.execute(
                        f"CREATE INDEX IF NOT EXISTS {name}_hnsw ON {name} USING hnsw ({column}) "
                        f"WITH (m = {o.hnsw_m}, ef_construction = {o.hnsw_ef_construction})"
                    )
        self._ready_tables.add(name)
        return name


_CREATED = re.compile(r"^CREATE (?:TABLE|INDEX) IF NOT EXISTS (\w+)")
_VECTORS = re.compile(r"vectors_[1-9][0-9]*")


def table_name(prefix: str, name: str) -> str:
    """``<prefix>_<name>`` for a table of this plugin's schema. Any other name
    is a programming error, refused here rather than sent as SQL: unquoted
    identifiers fold to lower case, so a misspelt one may even reach a table."""
    if name not in TABLES and not _VECTORS.fullmatch(name):
        raise ValueError(f"ragkit-postgres has no table {name!r}")
    return f"{prefix}_{name}"


def _schema(p: str) -> list[str]:
    ident = 'text COLLATE "C" NOT NULL'
    scope = f"workspace {ident}, namespace {ident}"
    return [
        "CREATE EXTENSION IF NOT EXISTS vector",
        f"CREATE TABLE IF NOT EXISTS {p}_kv ({scope}, key {ident}, value text NOT NULL, "
        "PRIMARY KEY (workspace, namespace, key))",
        # Version 2: a record's search terms, {term: count}, and how many it holds
        # (KV stores given a text_field; NULL in the others).
        f"ALTER TABLE {p}_kv ADD COLUMN IF NOT EXISTS terms jsonb",
        f"ALTER TABLE {p}_kv ADD COLUMN IF NOT EXISTS term_count integer",
        f"CREATE INDEX IF NOT EXISTS {p}_kv_terms ON {p}_kv USING gin (terms) WHERE terms IS NOT NULL",
        f"CREATE TABLE IF NOT EXISTS {p}_kv_text_filled ({scope}, field text NOT NULL, "
        "PRIMARY KEY (workspace, namespace))",
        f"CREATE TABLE IF NOT EXISTS {p}_doc_status ({scope}, id {ident}, status text NOT NULL, "
        "data text NOT NULL, generation bigint NOT NULL, PRIMARY KEY (workspace, namespace, id))",
        f"CREATE INDEX IF NOT EXISTS {p}_doc_status_by_status ON {p}_doc_status (workspace, namespace, status, id)",
        f"CREATE INDEX IF NOT EXISTS {p}_doc_status_by_generation "
        f"ON {p}_doc_status (workspace, namespace, generation)",
        f"CREATE TABLE IF NOT EXISTS {p}_doc_status_gen ({scope}, generation bigint NOT NULL, "
        "PRIMARY KEY (workspace, namespace))",
        f"CREATE TABLE IF NOT EXISTS {p}_doc_status_gone ({scope}, id {ident}, generation bigint NOT NULL, "
        "PRIMARY KEY (workspace, namespace, id))",
        f"CREATE INDEX IF NOT EXISTS {p}_doc_status_gone_by_generation "
        f"ON {p}_doc_status_gone (workspace, namespace, generation)",
        f"CREATE TABLE IF NOT EXISTS {p}_vector_stores ({scope}, dimension integer NOT NULL, embedder text, "
        "PRIMARY KEY (workspace, namespace))",
        f"CREATE TABLE IF NOT EXISTS {p}_nodes ({scope}, id {ident}, properties text NOT NULL, "
        "PRIMARY KEY (workspace, namespace, id))",
        f"CREATE TABLE IF NOT EXISTS {p}_edges ({scope}, a {ident}, b {ident}, properties text NOT NULL, "
        "PRIMARY KEY (workspace, namespace, a, b))",
        f"CREATE INDEX IF NOT EXISTS {p}_edges_by_b ON {p}_edges (workspace, namespace, b)",
        f"CREATE TABLE IF NOT EXISTS {p}_writer (workspace {ident} PRIMARY KEY, holder text NOT NULL, "
        "backend_pid integer NOT NULL)",
    ]


TABLES = frozenset({"schema", *(m.group(1) for m in map(re.compile(r"^CREATE TABLE IF NOT EXISTS _(\w+) ").match,
                                                            _schema("")) if m)})
"""The tables of the schema, without the prefix (``<prefix>_schema`` is made
before the rest, by ``_create_schema``); with ``vectors_<dimension>`` the names
``table_name`` accepts."""


async def _keep_session(conn: Any) -> None:
    """The pool's reset on release: nothing to send. asyncpg's default runs
    ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`` after every
    use, a round trip per store call; the only session state the stores leave
    on a pooled connection is the search settings of ``Database.configured``,
    which the connection records (the advisory locks they take are transaction
    locks, the writer lock has a connection of its own), and asyncpg still
    rolls back a transaction left open before this runs."""


def _set_config(settings: dict[str, str], local: bool) -> str:
    """One statement setting every one of ``settings`` (values bound, in order)."""
    calls = (f"set_config('{name}', ${i}, {str(local).lower()})" for i, name in enumerate(settings, 1))
    return "SELECT " + ", ".join(calls)


@functools.cache
def _connection_class() -> type:
    """asyncpg's connection that remembers the settings ``Database.configured``
    gave its session (the pool's proxy forwards these methods to it, and the
    record lives and dies with the server session it describes)."""
    import asyncpg

    class Connection(asyncpg.Connection):
        _ragkit_settings: dict[str, str] | None = None

        def session_settings(self) -> dict[str, str] | None:
            return self._ragkit_settings

        def remember_settings(self, settings: dict[str, str]) -> None:
            self._ragkit_settings = dict(settings)

    return Connection


@asynccontextmanager
async def errors(where: str, what: str, command_timeout: float | None = None) -> AsyncIterator[None]:
    """asyncpg's errors as ``StoreError`` naming the server (password hidden) and the fix."""
    import asyncpg

    try:
        yield
    except TimeoutError as exc:  # an OSError: caught first, it is not always the network's
        if command_timeout is None:
            raise StoreError(f"cannot reach {where} to {what}: no answer in time; "
                             "is the server running and the dsn right?") from exc
        raise StoreError(
            f"{where} failed to {what} within command_timeout ({command_timeout:g} s), and the statement "
            "was cancelled: another session may hold a lock it waits for (pg_stat_activity shows it), "
            "or raise command_timeout in the store's options"
        ) from exc
    except asyncpg.InvalidPasswordError as exc:
        raise StoreError(f"{where} refused the credentials to {what}: {exc}") from exc
    except (OSError, asyncpg.CannotConnectNowError, asyncpg.ConnectionDoesNotExistError,
            asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot reach {where} to {what}: {exc}; is the server running and the dsn right?") from exc
    except asyncpg.PostgresError as exc:
        raise StoreError(f"{where} failed to {what}: {exc}") from exc


class PostgresStore(BaseStore):
    """Base of every PostgreSQL store: the shared ``Database`` while open."""

    Options: ClassVar[type[BaseModel]] = PostgresOptions
    options: PostgresOptions

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._db: Database | None = None
        self.scope = (self.workspace, self.namespace)

    @property
    def db(self) -> Database:
        assert self._db is not None, "the store is open, so it has its database"
        return self._db

    def table(self, name: str) -> str:
        return table_name(self.options.table_prefix, name)

    async def _open(self) -> None:
        self._db = await Database.attach(self.options)

    async def _close(self) -> None:  # nothing to flush: every write is applied when it returns
        db, self._db = self._db, None
        if db is not None:
            await db.detach()

    def transaction_scope(self) -> Database | None:
        """Stores of one database write a commit batch in one transaction."""
        return self._db

    def writer_lease(self):
        from ragkit_postgres.lease import PostgresLease

        return PostgresLease(self)

    @asynccontextmanager
    async def read(self, what: str) -> AsyncIterator[Any]:
        async with self.db.errors(what), self.db.connection() as conn:
            yield conn

    @asynccontextmanager
    async def write(self, what: str, rows: dict[str, int] | None = None) -> AsyncIterator[Any]:
        """A connection in a transaction for one write; ``rows``: the rows it
        changes per table, for the planner statistics (``_stats``)."""
        for table, count in (rows or {}).items():
            self.db.stats.wrote(table, count)
        async with self.db.errors(what), self.db.writing() as conn:
            yield conn

    # -- rows keyed by one id column (KV records, vectors) ---------------------------

    async def delete_keys(self, table: str, column: str, keys: list[str]) -> None:
        async with self.write("delete records", {table: len(keys)}) as conn:
            await conn.execute(
                f"DELETE FROM {table} WHERE workspace = $1 AND namespace = $2 AND {column} = ANY($3::text[])",
                *self.scope, keys,
            )

    async def count_rows(self, table: str) -> int:
        async with self.read("count records") as conn:
            return await conn.fetchval(f"SELECT count(*) FROM {table} WHERE workspace = $1 AND namespace = $2",
                                       *self.scope)

    async def scan_keys(self, table: str, column: str) -> AsyncIterator[str]:
        sql = (f"SELECT {column} FROM {table} WHERE workspace = $1 AND namespace = $2 "
               f"AND {column} > $3 ORDER BY {column} LIMIT $4")
        async for row in self.pages(sql, *self.scope):
            yield row[0]

    async def pages(self, sql: str, *args: Any, size: int | None = None) -> AsyncIterator[Any]:
        """Rows of ``sql`` a page at a time, keyed by their first column: ``sql``
        takes ``args``, then the last key of the previous page (``''`` at the
        start: every key is longer, and so sorts after it in code point order)
        and the page size (``size``, default the ``batch_size`` option)
        [store.scan.complete-under-delete]. A plain ``key > $n``
        is an index range, so each page costs its own rows only."""
        after, size = "", size or self.options.batch_size
        while True:
            async with self.read("list records") as conn:
                rows = await conn.fetch(sql, *args, after, size)
            for row in rows:
                yield row
            if len(rows) < size:
                return
            after = rows[-1][0]
