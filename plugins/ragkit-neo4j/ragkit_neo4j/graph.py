"""``Neo4jGraphStore``: ragkit's undirected property graph in Neo4j, over Bolt.

Layout (one label per store, so workspaces and namespaces never meet)::

    (:`ragkit.<workspace>.<namespace>` {_ragkit_id: <node id>, <properties>...})
    (a)-[:RELATED {<properties>...}]->(b)        one relationship per edge, a <= b

Edges are undirected in ragkit: each is stored once, directed from the smaller
id to the larger (Python's ordering, the protocol's ``edge_key``); reads
canonicalise the asked pair and match that direction, so (a, b) and (b, a) are
one edge. A self-loop is one relationship from a node to itself.

Writes are batched: one ``UNWIND`` statement per ``batch_size`` rows, all the
statements of one call in one managed write transaction (retried on transient
errors such as deadlocks). On Neo4j a uniqueness constraint on ``_ragkit_id``
(created with ``IF NOT EXISTS``) makes concurrent ``MERGE`` safe; other servers
get an index. See ``cypher.py`` for how names and values reach Cypher.

Writes made under the workspace's writer lock are fenced: under this server's
own lease each statement checks the lock node (``ragkit_neo4j.lease``); under
another lease (Redis) each statement first checks the permit's deadline
(``ragkit.protocols.lease.Permit.send``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ragkit.errors import InvalidValueError, StoreClosedError, StoreError
from ragkit.protocols.base import Capability, StoreConfig
from ragkit.protocols.graph import EdgeKey, GraphContext, GraphStore, read_context
from ragkit.protocols.lease import permit_of
from ragkit.schema import Edge, Node
from ragkit_neo4j import _server
from ragkit_neo4j.cypher import (
    ID_KEY,
    IDENT,
    Binder,
    assemble,
    decode_properties,
    encode_properties,
    literal,
    piece_key,
    quote_ident,
    split_value,
    storable_text,
    store_label,
)
from ragkit_neo4j.lease import Neo4jLease

DEFAULT_URI = "bolt://localhost:7687"


READ_RETRY_PAUSES_S = (0.0, 0.1, 0.5)
"""Pauses before each new attempt of a read that found its connection dropped (``_read``)."""


class Neo4jOptions(BaseModel):
    """``[graph.options]`` of ``neo4j``."""

    model_config = ConfigDict(extra="forbid")

    uri: str = DEFAULT_URI
    """``bolt://host:7687`` (one server) or ``neo4j://host:7687`` (routing, clusters, Aura)."""
    user: str | None = None
    password: SecretStr | None = None
    """With ``user``: basic authentication. Neither: no authentication."""
    database: str | None = None
    """Neo4j database name; unset: the server's default database."""
    batch_size: int = Field(default=500, ge=1, le=100_000)
    """Rows per ``UNWIND`` statement (writes, batch reads) and per scan page."""
    label_prefix: str = "ragkit"
    """First part of the store's label ``<prefix>.<workspace>.<namespace>``."""
    relationship_type: str = "RELATED"
    query_values: Literal["auto", "parameters", "inline"] = "auto"
    """``auto``: query parameters when the server handles them (Neo4j), escaped
    literals when it does not (FalkorDB's Bolt listener). Force one for tests."""
    max_message_bytes: int | None = Field(default=None, ge=4096)
    """With literals: the largest statement to send and value to read back in one
    piece; longer values are stored in pieces (``_ragkitp<n>_<key>``) and read
    property by property. Unset: 60000 for FalkorDB's listener (which loses
    Bolt messages over 64 KB), 4 MiB otherwise."""
    connection_timeout: float = Field(default=10.0, gt=0)
    """Seconds ``open()`` waits to connect and to learn what the server supports
    (the driver's own limit covers the TCP connect only: a server that accepts
    and never answers held ``open()`` forever)."""
    query_timeout: float | None = Field(default=None, gt=0)
    """Seconds to wait for one call's statements; unset: no limit."""
    max_connection_pool_size: int = Field(default=100, ge=1)
    indexes: Literal["auto", "create", "skip"] = "auto"
    """Index ``_ragkit_id`` at ``open()``: ``create`` makes a uniqueness
    constraint (Neo4j, ``IF NOT EXISTS``) or an index (other servers, after
    looking in ``db.indexes()``); ``auto`` does so except on FalkorDB's listener,
    whose index trims surrounding whitespace from the strings it indexes (a
    lookup of ``" a "`` then finds nothing and ``MERGE`` duplicates the node)."""

    @field_validator("label_prefix", "relationship_type")
    @classmethod
    def _ident(cls, value: str) -> str:
        if not IDENT.fullmatch(value):
            raise ValueError(f"use a letter, then letters, digits or '_' (at most 64), got {value!r}")
        return value

    @model_validator(mode="after")
    def _auth(self) -> Neo4jOptions:
        if self.password is not None and self.user is None:
            raise ValueError("password is set but user is not; set both, or neither for no auth")
        return self


class Neo4jGraphStore(GraphStore):
    """Undirected property graph in Neo4j (or another Bolt server: see README)."""

    name: ClassVar[str] = "neo4j"
    # Not TRANSACTIONAL: the Bolt stand-in used in CI acknowledges transactions
    # without rolling back. On Neo4j each call's statements share one transaction.
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.CONCURRENT_WRITES}
    )
    Options: ClassVar[type[Neo4jOptions]] = Neo4jOptions

    options: Neo4jOptions

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self.label_name = store_label(self.options.label_prefix, config.workspace, config.namespace)
        self._label = quote_ident(self.label_name)
        self._rel = quote_ident(self.options.relationship_type)
        self._shared: _server.SharedDriver | None = None

    # -- connection ------------------------------------------------------------------

    def _driver_key(self) -> tuple[Any, ...]:
        o = self.options
        secret = o.password.get_secret_value() if o.password else None
        return (o.uri, o.user, secret, o.connection_timeout, o.max_connection_pool_size, o.query_values)

    def _make_driver(self) -> Any:
        from neo4j import AsyncGraphDatabase

        o = self.options
        auth = (o.user, o.password.get_secret_value() if o.password else "") if o.user else None
        try:
            return AsyncGraphDatabase.driver(
                o.uri,
                auth=auth,
                connection_timeout=o.connection_timeout,
                max_connection_pool_size=o.max_connection_pool_size,
                user_agent="ragkit-neo4j",
            )
        except Exception as exc:  # bad URI scheme and the like
            raise StoreError(f"cannot create a Neo4j driver for {o.uri!r}: {exc}") from exc

    @property
    def server(self) -> _server.ServerInfo:
        """What the connected server supports (after ``open()``)."""
        shared = self._conn()
        assert shared.info is not None
        return shared.info

    @property
    def driver(self) -> Any:
        """The neo4j async driver (after ``open()``), shared with the other
        stores of this loop, for tools and tests that query the graph directly."""
        return self._conn().driver

    def _conn(self) -> _server.SharedDriver:
        """The shared driver (from ``open()`` on); the protocol's methods run
        only on an open store, this guards the extras (``server``, ``ensure_schema``)."""
        if self._shared is None:
            raise StoreClosedError(f"{self!r} is not connected: `await store.open()` first")
        return self._shared

    @asynccontextmanager
    async def _errors(self, what: str) -> AsyncIterator[None]:
        from neo4j.exceptions import AuthError, DriverError, Neo4jError, ServiceUnavailable

        try:
            yield
        except AuthError as exc:
            raise StoreError(
                f"Neo4j at {self.options.uri} refused the credentials while trying to {what}: "
                f"{exc.message}; check user/password in [graph.options]"
            ) from exc
        except ServiceUnavailable as exc:
            raise StoreError(
                f"cannot reach Neo4j at {self.options.uri} to {what}: {exc}; is the server "
                "running and the uri right?"
            ) from exc
        except (Neo4jError, DriverError) as exc:
            raise StoreError(f"Neo4j at {self.options.uri} failed to {what}: {exc}") from exc

    def _session(self, shared: _server.SharedDriver) -> Any:
        return shared.driver.session(database=self.options.database, fetch_size=-1)

    async def _timed(self, what: str, work: Any) -> Any:
        timeout = self.options.query_timeout
        if timeout is None:
            return await work
        try:
            return await asyncio.wait_for(work, timeout)
        except TimeoutError as exc:
            raise StoreError(
                f"Neo4j at {self.options.uri} did not answer within {timeout} s "
                f"(query_timeout) while trying to {what}"
            ) from exc

    async def _read(self, what: str, query: str, params: dict[str, Any]) -> list[list[Any]]:
        from neo4j.exceptions import ServiceUnavailable, SessionExpired

        shared = self._conn()

        async def work() -> list[list[Any]]:
            async with self._session(shared) as session:
                result = await session.run(query, params)
                return await result.values()

        async with self._errors(what):
            for pause in READ_RETRY_PAUSES_S:
                try:
                    return await self._timed(what, work())
                except (ServiceUnavailable, SessionExpired):
                    # A pooled connection the server had dropped (FalkorDB's
                    # listener does, now and then, under an indexing run's
                    # load): the driver has discarded the idle ones to that
                    # server, and a read is safe to run again. Connections
                    # other tasks had checked out come back dead too, so
                    # more than once, after a pause. Writes need no such
                    # step: the driver's managed transaction (execute_write)
                    # retries them itself.
                    await asyncio.sleep(pause)
            return await self._timed(what, work())

    async def _write(
        self, what: str, statements: list[tuple[str, dict[str, Any]]], *, fenced: bool = True
    ) -> list[list[list[Any]]]:
        """Run ``statements`` in one managed write transaction; their rows.
        ``fenced`` (all but the lease's and the schema's own): under a hold
        of the writer lock, refused once the lease is another's (module docstring)."""
        shared = self._conn()
        if not statements:
            return []
        permit = permit_of(self.fence) if fenced else None
        lease = permit.lease if permit is not None else None
        guarded = isinstance(lease, Neo4jLease) and lease.reaches(self)
        if guarded:
            statements = lease.guarded(self, permit.holder, statements)

        async def work(tx: Any) -> list[list[list[Any]]]:
            out = []
            for query, params in statements:
                if permit is not None and not guarded:
                    await permit.send()
                result = await tx.run(query, params)
                out.append(await result.values())
            return out

        async def run() -> list[list[list[Any]]]:
            async with self._session(shared) as session:
                return await session.execute_write(work)

        async with self._errors(what):
            out = await self._timed(what, run())
        if guarded:
            if not out.pop():  # the lock node is no longer this holder's
                raise permit.refused()
        return out

    @property
    def _binder(self) -> Binder:
        return Binder(self.server.inline_values)

    @property
    def _limit(self) -> int | None:
        """Bytes per message when values travel as literals; ``None`` with parameters."""
        info = self.server
        if not info.inline_values:
            return None
        if self.options.max_message_bytes is not None:
            return self.options.max_message_bytes
        return 60_000 if info.product == "falkordb-bolt" else 4 * 1024 * 1024

    def _batches(self, rows: list[Any]) -> Iterator[list[Any]]:
        """``rows`` cut by ``batch_size`` and, for literals, by message size."""
        binder, limit = self._binder, self._limit
        batch: list[Any] = []
        size = 0
        for row in rows:
            row_size = binder.size(row)
            if batch and (len(batch) >= self.options.batch_size or (limit and size + row_size > limit // 2)):
                yield batch
                batch, size = [], 0
            batch.append(row)
            size += row_size
        if batch:
            yield batch

    def _statements(self, template: str, rows: list[Any], suffix: str = "") -> list[tuple[str, dict[str, Any]]]:
        """One statement per batch of ``rows`` (bound to ``$rows``), plus ``suffix``."""
        out = []
        for batch in self._batches(rows):
            query, params = self._binder.bind(template, rows=batch)
            out.append((query + suffix, params))
        return out

    def _query_ids(self, ids: Iterable[str]) -> list[str]:
        """The asked ids (distinct and valid: the protocol's base checked them)
        that can exist here: none holding NUL where values go inline."""
        if not self.server.inline_values:
            return list(ids)
        return [i for i in ids if storable_text(i)]

    def _check_id(self, node_id: str) -> str:
        """What this server cannot store, beyond the protocol's rules (checked already)."""
        limit = self._limit
        if limit is not None:
            if "\x00" in node_id:
                raise InvalidValueError(
                    f"node id {node_id[:40]!r} holds NUL, which {self.server.agent} "
                    f"({self.server.product}) cannot store"
                )
            if len(node_id.encode("utf-8")) > limit // 8:
                raise InvalidValueError(
                    f"node id {node_id[:40]!r}... is longer than {limit // 8} bytes, the most "
                    f"{self.server.product} can match on (max_message_bytes / 8)"
                )
        return node_id

    def writer_lease(self) -> Neo4jLease:
        """The workspace's writer lock, for workspaces whose doc-status store
        holds none (``ragkit_neo4j.lease``): this server is what every process
        of the workspace shares."""
        return Neo4jLease(self)

    # -- lifecycle ---------------------------------------------------------------------

    async def _open(self) -> None:
        o = self.options
        acquiring = _server.acquire(self._driver_key(), self._make_driver, o.database, o.query_values)
        async with self._errors("connect"):
            try:  # acquire() releases what it took when cancelled
                shared = await asyncio.wait_for(acquiring, o.connection_timeout)
            except TimeoutError as exc:
                raise StoreError(
                    f"Neo4j at {o.uri} did not answer within {o.connection_timeout} s (connection_timeout) "
                    "while trying to connect; is a Bolt server listening there, and is it up?"
                ) from exc
        self._shared = shared
        try:
            await self.ensure_schema()
        except BaseException:
            await self._close()
            raise

    async def _close(self) -> None:  # nothing to flush: every call commits its own transaction
        if self._shared is not None:
            await _server.release(self._shared)  # refused on another live loop: the store stays open
            self._shared = None

    def _wants_schema(self) -> bool:
        if self.options.indexes == "auto":
            return self.server.product != "falkordb-bolt"
        return self.options.indexes == "create"

    async def ensure_schema(self, *, force: bool = False) -> None:
        """Index ``_ragkit_id`` as the ``indexes`` option says; idempotent, and
        done once per driver and label unless ``force``."""
        shared = self._conn()
        key = (self.options.database, self.label_name)
        if not self._wants_schema() or (key in shared.schema_done and not force):
            return
        info = self.server
        if info.if_not_exists:
            name = quote_ident(f"{self.label_name}.{ID_KEY}.unique")
            await self._write(
                "create its uniqueness constraint",
                [(f"CREATE CONSTRAINT {name} IF NOT EXISTS FOR (n:{self._label}) "
                  f"REQUIRE n.{ID_KEY} IS UNIQUE", {})],
                fenced=False,
            )
        elif not await self._has_index():
            try:
                await self._write(
                    "create its index", [(f"CREATE INDEX FOR (n:{self._label}) ON (n.{ID_KEY})", {})], fenced=False
                )
            except StoreError:
                if not await self._has_index():  # another client may have just made it
                    raise
        shared.schema_done.add(key)

    async def _has_index(self) -> bool:
        rows = await self._read(
            "list indexes", "CALL db.indexes() YIELD label, properties RETURN label, properties", {}
        )
        return any(label == self.label_name and ID_KEY in (props or []) for label, props in rows)

    async def index_count(self) -> int:
        """Indexes on this store's label (for tests of idempotent schema creation)."""
        if self.server.if_not_exists:
            rows = await self._read(
                "list indexes",
                "SHOW INDEXES YIELD labelsOrTypes, properties RETURN labelsOrTypes, properties", {},
            )
        else:
            rows = await self._read(
                "list indexes", "CALL db.indexes() YIELD label, properties RETURN [label], properties", {}
            )
        return sum(1 for labels, props in rows if self.label_name in (labels or []) and ID_KEY in (props or []))

    async def _drop(self) -> None:
        binder = self._binder
        query, params = binder.bind(
            f"MATCH (n:{self._label}) WITH n LIMIT $limit DETACH DELETE n RETURN count(*)",
            limit=self.options.batch_size,
        )
        while True:
            ((count,),) = (await self._write("drop the graph", [(query, params)]))[0]
            if count < self.options.batch_size:
                return

    # -- writes ------------------------------------------------------------------------

    async def _upsert_nodes(self, nodes: dict[str, dict[str, Any]]) -> None:
        rows = [(self._check_id(n), encode_properties(props)) for n, props in nodes.items()]
        if self.server.inline_values:
            statements = self._literal_upserts(
                [([n], props) for n, props in rows], "n",
                merge=lambda c: f"MERGE (n:{self._label} {{{ID_KEY}: {c[0]}}}) SET n = {{{ID_KEY}: {c[0]}}}",
                match=lambda c: f"MATCH (n:{self._label} {{{ID_KEY}: {c[0]}}})",
            )
        else:
            statements = self._statements(
                f"UNWIND $rows AS row MERGE (n:{self._label} {{{ID_KEY}: row.id}}) SET n = row.props",
                [{"id": n, "props": {**props, ID_KEY: n}} for n, props in rows],
            )
        await self._write("upsert nodes", statements)

    async def _upsert_edges(self, edges: dict[EdgeKey, dict[str, Any]]) -> None:
        checked = {(self._check_id(a), self._check_id(b)): encode_properties(p) for (a, b), p in edges.items()}
        node, rel = self._label, self._rel
        if self.server.inline_values:
            statements = self._literal_upserts(
                [([a, b], props) for (a, b), props in checked.items()], "r",
                merge=lambda c: (
                    f"MERGE (a:{node} {{{ID_KEY}: {c[0]}}}) MERGE (b:{node} {{{ID_KEY}: {c[1]}}}) "
                    f"MERGE (a)-[r:{rel}]->(b) SET r = {{}}"
                ),
                match=lambda c: (
                    f"MATCH (a:{node} {{{ID_KEY}: {c[0]}}})-[r:{rel}]->(b:{node} {{{ID_KEY}: {c[1]}}})"
                ),
            )
        else:
            statements = self._statements(
                f"UNWIND $rows AS row MERGE (a:{node} {{{ID_KEY}: row[0]}}) "
                f"MERGE (b:{node} {{{ID_KEY}: row[1]}}) MERGE (a)-[r:{rel}]->(b) SET r = row[2]",
                [[a, b, props] for (a, b), props in checked.items()],
            )
        await self._write("upsert edges", statements)

    def _literal_upserts(
        self,
        rows: list[tuple[list[str], dict[str, Any]]],
        var: str,
        merge: Callable[[list[str]], str],
        match: Callable[[list[str]], str],
    ) -> list[tuple[str, dict[str, Any]]]:
        """Statements writing ``rows`` (key columns, stored properties) as literals.

        FalkorDB's map literals take only plain identifiers as keys, so each
        property is set by name (``SET n.`key` = ...``). Rows that fit are
        batched: grouped by their set of keys, one ``UNWIND`` statement per group
        and batch. A value longer than a quarter message is stored in pieces, and a
        row too long for a batch is written alone over as many statements as it
        needs (``merge`` then ``match`` heads, literal key columns).
        """
        limit = self._limit or 0
        piece = limit // 4
        shapes: dict[tuple[str, ...], list[str]] = {}
        statements: list[tuple[str, dict[str, Any]]] = []
        for cols, props in rows:
            col_text = [literal(c) for c in cols]
            sets: list[tuple[str, str]] = []
            for key, value in props.items():
                text = literal(value)
                if len(text) * 4 > piece and len(text.encode("utf-8")) > piece:
                    sets += [(piece_key(i, key), literal(p)) for i, p in enumerate(split_value(value, piece))]
                else:
                    sets.append((key, text))
            sets.sort()
            cost = sum(len(t.encode("utf-8")) for t in col_text) + sum(
                len(k.encode("utf-8")) + len(t.encode("utf-8")) + 16 for k, t in sets
            )
            if cost <= piece:
                keys = tuple(k for k, _ in sets)
                shapes.setdefault(keys, []).append("[" + ", ".join(col_text + [t for _, t in sets]) + "]")
                continue
            head, chunk, size = merge(col_text), [], 0
            for key, text in sets:
                item = f"{var}.{quote_ident(key)} = {text}"
                if chunk and size + len(item.encode("utf-8")) > limit // 2:
                    statements.append((f"{head} SET {', '.join(chunk)}", {}))
                    head, chunk, size = match(col_text), [], 0
                chunk.append(item)
                size += len(item.encode("utf-8"))
            statements.append((f"{head} SET {', '.join(chunk)}" if chunk else head, {}))
        width = len(rows[0][0]) if rows else 0
        row_cols = [f"row[{i}]" for i in range(width)]
        for keys, texts in shapes.items():
            sets_text = ", ".join(f"{var}.{quote_ident(k)} = row[{width + i}]" for i, k in enumerate(keys))
            template = merge(row_cols) + (f" SET {sets_text}" if keys else "")
            batch: list[str] = []
            size = 0
            for text in texts:
                if batch and (len(batch) >= self.options.batch_size or size + len(text) > limit // 2):
                    statements.append((f"UNWIND [{', '.join(batch)}] AS row {template}", {}))
                    batch, size = [], 0
                batch.append(text)
                size += len(text.encode("utf-8")) + 2
            if batch:
                statements.append((f"UNWIND [{', '.join(batch)}] AS row {template}", {}))
        return statements

    async def _delete_nodes(self, ids: list[str]) -> None:
        wanted = self._query_ids(ids)
        await self._write(
            "delete nodes",
            self._statements(f"UNWIND $rows AS id MATCH (n:{self._label} {{{ID_KEY}: id}}) DETACH DELETE n", wanted),
        )

    async def _delete_edges(self, keys: list[EdgeKey]) -> None:
        keys = self._edge_keys(keys)
        await self._write(
            "delete edges",
            self._statements(
                f"UNWIND $rows AS p MATCH (a:{self._label} {{{ID_KEY}: p[0]}})"
                f"-[r:{self._rel}]->(b:{self._label} {{{ID_KEY}: p[1]}}) DELETE r",
                [list(k) for k in keys],
            ),
        )

    def _edge_keys(self, keys: list[EdgeKey]) -> list[EdgeKey]:
        """The asked edges whose endpoints can exist here."""
        ok = set(self._query_ids(n for key in keys for n in key))
        return [(a, b) for a, b in keys if a in ok and b in ok]

    # -- reads ---------------------------------------------------------------------------

    async def _per_id(self, what: str, template: str, ids: list[str]) -> dict[Any, Any]:
        """``{first column: second column}`` over batches of ``ids``."""
        found: dict[Any, Any] = {}
        for query, params in self._statements(template, ids):
            for key, value in await self._read_rows(what, query, params):
                found[key] = value
        return found

    @property
    def _grouped(self) -> bool:
        """Rows come back a record per group of rows, not a record per row (``_rows``)."""
        return self._limit is not None and self.server.product == "falkordb-bolt"

    def _rows(self, cols: str) -> str:
        """Return clause for rows ``[cols]``: on FalkorDB's listener, grouped.

        The driver's work per record (a Bolt message each) was most of a graph
        read's time on loopback: 120 degree rows took 3.4 ms as 120 records and
        1.5 ms in one. A record must fit in a message, so a group holds at most
        ``limit // 8`` characters of JSON (4 bytes a character at most: half a
        message), counted by the widest row. Other servers keep a record per
        row: only FalkorDB's listener is tested here, and only it has
        ``toJSON()`` to size a group by."""
        if not self._grouped:
            return f"RETURN {cols}"
        budget = self._limit // 8  # type: ignore[operator]
        return (f"WITH [{cols}] AS row WITH collect(row) AS rows, coalesce(max(size(toJSON(row))), 1) AS widest "
                f"WITH rows, CASE WHEN widest >= {budget} THEN 1 ELSE {budget} / widest END AS per "
                f"UNWIND range(0, size(rows) - 1, per) AS i RETURN rows[i..i + per]")

    async def _read_rows(self, what: str, query: str, params: dict[str, Any]) -> list[list[Any]]:
        """The rows of a statement that ends in ``_rows``."""
        records = await self._read(what, query, params)
        return [row for record in records for row in record[0]] if self._grouped else records

    @property
    def _by_property(self) -> bool:
        """Read properties one record per property (values may be stored in pieces)."""
        return self._limit is not None

    def _props_clause(self, var: str, keys: str, *, grouped: bool = True) -> str:
        """Return clause of rows (``keys``, k, value): properties whole (k is
        ``null``), or a row per property (the extra ``null`` key keeps entities
        without properties in the result); grouped by ``_rows`` unless told not
        to (scans, whose order must hold).

        On FalkorDB's listener a map that surely fits in a message (its JSON,
        at most 4 bytes a character, within half of one) comes whole in the
        ``null`` key's row: a record per property cost a Bolt message each, and
        the client's per-message work was most of a graph read's time."""
        if not self._by_property:
            unwind, k, value = "", "null", f"properties({var})"
        elif self.server.product != "falkordb-bolt":  # no toJSON() to size a map by
            unwind, k, value = f"UNWIND keys({var}) + [null] AS k ", "k", f"{var}[k]"
        else:
            whole = f"size(toJSON(properties({var}))) <= {self._limit // 8}"  # type: ignore[operator]
            unwind = f"UNWIND CASE WHEN {whole} THEN [null] ELSE keys({var}) + [null] END AS k "
            k, value = "k", f"CASE WHEN k IS NULL THEN CASE WHEN {whole} THEN properties({var}) END ELSE {var}[k] END"
        cols = f"{keys}, {k}, {value}"
        return unwind + (self._rows(cols) if grouped else f"RETURN {cols}")

    @staticmethod
    def _group(rows: list[list[Any]], width: int) -> dict[Any, dict[str, Any]]:
        """``{key columns: decoded properties}`` from rows of (key columns..., k, value)
        where k is ``None`` for a whole property map in value."""
        pairs: dict[Any, list[tuple[Any, Any]]] = {}
        for row in rows:
            key = row[0] if width == 1 else tuple(row[:width])
            k, value = row[width], row[width + 1]
            pairs.setdefault(key, [])
            if k is None and isinstance(value, dict):
                pairs[key].extend(value.items())
            elif k is not None:
                pairs[key].append((k, value))
        return {key: decode_properties(assemble(p)) for key, p in pairs.items()}

    async def _get_nodes(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        rows: list[list[Any]] = []
        for query, params in self._statements(
            f"UNWIND $rows AS id MATCH (n:{self._label} {{{ID_KEY}: id}}) WITH id, n ",
            self._query_ids(ids), self._props_clause("n", "id"),
        ):
            rows += await self._read_rows("read nodes", query, params)
        return self._group(rows, 1)

    async def _get_edges(self, keys: list[EdgeKey]) -> dict[EdgeKey, dict[str, Any]]:
        keys = self._edge_keys(keys)
        rows: list[list[Any]] = []
        for query, params in self._statements(
            f"UNWIND $rows AS p MATCH (a:{self._label} {{{ID_KEY}: p[0]}})"
            f"-[r:{self._rel}]->(b:{self._label} {{{ID_KEY}: p[1]}}) WITH p, r ",
            [list(k) for k in keys], self._props_clause("r", "p[0], p[1]"),
        ):
            rows += await self._read_rows("read edges", query, params)
        return self._group(rows, 2)

    async def _nodes_edges(self, ids: list[str]) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        # One row per neighbour (not collect() per node): grouped by size,
        # records stay within a message however many edges a hub has.
        for query, params in self._statements(
            f"UNWIND $rows AS id MATCH (n:{self._label} {{{ID_KEY}: id}}) "
            f"OPTIONAL MATCH (n)-[:{self._rel}]-(m:{self._label}) WITH DISTINCT id, m.{ID_KEY} AS other "
            + self._rows("id, other"),
            self._query_ids(ids),
        ):
            for node_id, other in await self._read_rows("read node edges", query, params):
                neighbours = found.setdefault(node_id, set())
                if other is not None:
                    neighbours.add(other)
        return found

    async def _degrees(self, ids: list[str]) -> dict[str, int]:
        return await self._per_id(
            "read degrees",
            f"UNWIND $rows AS id MATCH (n:{self._label} {{{ID_KEY}: id}}) "
            f"OPTIONAL MATCH (n)-[r:{self._rel}]-(:{self._label}) WITH id, count(DISTINCT r) AS degree "
            + self._rows("id, degree"),
            self._query_ids(ids),
        )

    async def _context(self, ids: list[str], keys: list[EdgeKey], incident: bool) -> GraphContext:
        # The reads that do not wait for each other at once, each in its own
        # session: a query's graph stage waits one round trip (two with
        # incident edges) where it waited three or four.
        return await read_context(self, ids, keys, incident, concurrently=True)

    async def _node_count(self) -> int:
        rows = await self._read("count nodes", f"MATCH (n:{self._label}) RETURN count(n)", {})
        return int(rows[0][0])

    async def _edge_count(self) -> int:
        rows = await self._read(
            "count edges", f"MATCH (:{self._label})-[r:{self._rel}]->(:{self._label}) RETURN count(r)", {}
        )
        return int(rows[0][0])

    async def _labels(self) -> list[str]:
        rows = await self._read("list node ids", f"MATCH (n:{self._label}) RETURN n.{ID_KEY}", {})
        return [r[0] for r in rows]

    async def _nodes(self) -> AsyncIterator[Node]:
        # Keyset pages: each page starts after the last id of the previous one, so
        # a node present for the whole scan is yielded once even while others write.
        last: str | None = None
        while True:
            limit = self.options.batch_size
            where = "" if last is None else f"WHERE n.{ID_KEY} > $after "
            values: dict[str, Any] = {"limit": limit} if last is None else {"after": last, "limit": limit}
            query, params = self._binder.bind(
                f"MATCH (n:{self._label}) {where}WITH n ORDER BY n.{ID_KEY} LIMIT $limit "
                f"WITH n.{ID_KEY} AS id, n ", **values,
            )
            rows = await self._read(
                "scan nodes",
                query + self._props_clause("n", "id", grouped=False) + " ORDER BY id",
                params,
            )
            page = self._group(rows, 1)  # in the server's order: its last id is the cursor
            for node_id, props in page.items():
                yield Node.model_construct(id=node_id, properties=props)
            if len(page) < limit:
                return
            last = next(reversed(page))

    async def _edges(self) -> AsyncIterator[Edge]:
        last: tuple[str, str] | None = None
        a_id, b_id = f"a.{ID_KEY}", f"b.{ID_KEY}"
        while True:
            limit = self.options.batch_size
            if last is None:
                where, values = "", {"limit": limit}
            else:
                where = f"WHERE {a_id} > $a OR ({a_id} = $a AND {b_id} > $b) "
                values = {"a": last[0], "b": last[1], "limit": limit}
            query, params = self._binder.bind(
                f"MATCH (a:{self._label})-[r:{self._rel}]->(b:{self._label}) {where}"
                f"WITH a, r, b ORDER BY {a_id}, {b_id} LIMIT $limit WITH {a_id} AS s, {b_id} AS t, r ",
                **values,
            )
            rows = await self._read(
                "scan edges",
                query + self._props_clause("r", "s, t", grouped=False) + " ORDER BY s, t",
                params,
            )
            page = self._group(rows, 2)
            for (a, b), props in page.items():
                yield Edge.model_construct(source=a, target=b, properties=props)
            if len(page) < limit:
                return
            last = next(reversed(page))


__all__ = ["Neo4jGraphStore", "Neo4jOptions"]
