"""What the Redis KV and doc-status stores share: options, key layout, the
client's lifecycle and error translation.

Key layout (``<prefix>`` defaults to ``ragkit``)::

    <prefix>:{<workspace>:<kind>:<namespace>}:r:<record key>   one string per record (JSON)
    <prefix>:{<workspace>:<kind>:<namespace>}:ids              sorted set of record keys (score 0)

plus, for doc status, one sorted set per status (``...:s:<status>``). The part
in braces is a Redis Cluster hash tag: every key of one store lives in one slot,
so a batch can be one ``MULTI``/``EXEC``. Workspace and namespace names cannot
hold ``:`` or ``}``, so no two stores share a key. Iteration and counts use the
``ids`` sorted set (``ZRANGEBYLEX`` pages keyed by the last member, ``ZCARD``):
nothing scans the keyspace (no ``KEYS``, no ``SCAN``).

Fenced writes (``commit``). A write made under a hold of the workspace's
writer lock (``fence.permit()``) whose lease is a Redis lease on this store's
server ``WATCH``es the lease's fencing counter, reads it, and runs its
``MULTI``/``EXEC`` only if the counter is still the holder's token: another
writer's acquisition in between aborts the ``EXEC``, so the write is refused
(``WriterLeaseLostError``) and nothing of it is applied. Under any other lease
(another server, another backend) the write only checks the permit's deadline
immediately before ``EXEC`` leaves (``Permit.send``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit.errors import StoreError
from ragkit.protocols.base import BaseStore
from ragkit.protocols.lease import permit_of

_PREFIX = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


class RedisOptions(BaseModel):
    """``[kv.options]`` / ``[doc_status.options]`` of ``redis``."""

    model_config = ConfigDict(extra="forbid")

    url: str = "redis://localhost:6379/0"
    """``redis://[user:password@]host:port/db``, ``rediss://`` for TLS, ``unix:///path.sock``."""
    key_prefix: str = "ragkit"
    """First part of every key; letters, digits, ``_``, ``.``, ``-``."""
    batch_size: int = Field(default=1000, ge=1, le=100_000)
    """Keys per ``MGET``/``UNLINK`` and per page of key scans."""
    socket_timeout: float | None = Field(default=30.0, gt=0)
    """Seconds a command, and a call waiting for a free connection, may take; ``None``: no limit."""
    max_connections: int = Field(default=50, ge=1)
    """Connections per open store; more concurrent calls wait for a free one."""

    @field_validator("key_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not _PREFIX.fullmatch(value):
            raise ValueError(f"use 1-64 letters, digits, '_', '.' or '-', got {value!r}")
        return value


def encode_key(key: str) -> bytes:
    """A record key as bytes (the protocols let no key with a lone surrogate
    reach a store: ``storable_key``)."""
    return key.encode("utf-8")


def chunked(items: list[Any], size: int) -> Iterator[list[Any]]:
    return (items[i:i + size] for i in range(0, len(items), size))


class RedisStore(BaseStore):
    """Base of both Redis stores: one client per open store."""

    kind: str = ""
    options: RedisOptions

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.base = f"{self.options.key_prefix}:{{{self.workspace}:{self.kind}:{self.namespace}}}"
        self.ids_key = f"{self.base}:ids".encode()
        self._record_prefix = f"{self.base}:r:".encode()
        self._client: Any = None

    def record_key(self, key: str) -> bytes:
        return self._record_prefix + encode_key(key)

    @property
    def client(self) -> Any:
        """The ``redis.asyncio.Redis`` client (open stores only)."""
        assert self._client is not None, "the store is open, so it has a client"
        return self._client

    @asynccontextmanager
    async def errors(self, what: str) -> AsyncIterator[None]:
        from redis.exceptions import AuthenticationError, ConnectionError, RedisError, TimeoutError

        try:
            yield
        except AuthenticationError as exc:
            raise StoreError(f"Redis at {self._safe_url} refused the credentials to {what}: {exc}") from exc
        except ConnectionError as exc:
            if isinstance(exc.__cause__, asyncio.TimeoutError):  # the pool's wait ran out, not the server
                raise StoreError(
                    f"all {self.options.max_connections} connections to Redis at {self._safe_url} stayed busy "
                    f"for {self.options.socket_timeout:g} s, so a call could not {what}: raise max_connections "
                    "(or socket_timeout), or make fewer concurrent calls"
                ) from exc
            raise self._unreachable(what, exc) from exc
        except TimeoutError as exc:
            raise self._unreachable(what, exc) from exc
        except RedisError as exc:
            raise StoreError(f"Redis at {self._safe_url} failed to {what}: {exc}") from exc

    def _unreachable(self, what: str, exc: Exception) -> StoreError:
        return StoreError(
            f"cannot reach Redis at {self._safe_url} to {what}: {exc}; is the server running "
            "and the url right?"
        )

    @property
    def _safe_url(self) -> str:
        parsed = urlparse(self.options.url)
        if parsed.password:
            return self.options.url.replace(f":{parsed.password}@", ":****@")
        return self.options.url

    async def _open(self) -> None:
        from redis.asyncio import BlockingConnectionPool, Redis

        try:
            # Blocking: a burst of more calls than max_connections waits for a
            # free connection (up to socket_timeout) instead of failing with
            # "Too many connections", which the plain pool raises.
            pool = BlockingConnectionPool.from_url(
                self.options.url,
                socket_timeout=self.options.socket_timeout,
                max_connections=self.options.max_connections,
                timeout=self.options.socket_timeout,
            )
        except ValueError as exc:
            raise StoreError(f"invalid Redis url {self._safe_url!r}: {exc}") from exc
        client = Redis.from_pool(pool)  # owns the pool: closing the client closes it
        try:
            async with self.errors("connect"):
                await client.ping()
        except BaseException:
            await client.aclose()
            raise
        self._client = client

    async def _close(self) -> None:  # nothing to flush: every call is applied when it returns
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def scan_index(self, index: bytes, after: str | None, count: int) -> list[str]:
        """Up to ``count`` members of ``index`` after ``after``, in byte (code point) order."""
        start = b"-" if after is None else b"(" + encode_key(after)
        async with self.errors("list keys"):
            members = await self.client.zrangebylex(index, start, b"+", start=0, num=count)
        return [m.decode("utf-8") for m in members]

    @property
    def indexes(self) -> list[bytes]:
        """The sorted sets that list this store's records, ``ids_key`` first."""
        return [self.ids_key]

    async def fetch(self, keys: list[str]) -> dict[str, bytes]:
        """``{key: stored bytes}`` of the records among ``keys``: one ``MGET`` per batch."""
        found: dict[str, bytes] = {}
        async with self.errors("read records"):
            for part in chunked(keys, self.options.batch_size):
                values = await self.client.mget([self.record_key(k) for k in part])
                found.update((k, v) for k, v in zip(part, values) if v is not None)
        return found

    async def commit(self, what: str, queue: Callable[[Any], None]) -> list[Any]:
        """One ``MULTI``/``EXEC`` of what ``queue(pipe)`` queues, fenced (see
        the module docstring); its replies."""
        from redis.exceptions import WatchError

        permit = permit_of(self.fence)
        async with self.errors(what):
            async with self.client.pipeline(transaction=True) as pipe:
                counter = await self.watch_fence(pipe, permit)
                if counter is not None:
                    pipe.multi()
                queue(pipe)
                if counter is None and permit is not None:
                    await permit.send()
                try:
                    return await pipe.execute()
                except WatchError:  # only the fencing counter is watched: another writer took the lease
                    assert permit is not None
                    raise permit.refused() from None

    async def watch_fence(self, pipe: Any, permit: Any) -> bytes | None:
        """``WATCH`` the fencing counter of ``permit``'s lease when it is a
        Redis lease on this server, and refuse the write at once if the
        counter is no longer the holder's; the counter's key (``None``: no
        watch, the permit's deadline is all there is to check)."""
        from ragkit_redis.lease import RedisLease

        lease = permit.lease if permit is not None else None
        if not isinstance(lease, RedisLease) or not lease.same_server(self.options.url) or not permit.token:
            return None
        await pipe.watch(lease.fence_key)
        if int(await pipe.get(lease.fence_key) or 0) != permit.token:
            raise permit.refused()
        return lease.fence_key

    async def _delete(self, keys: list[str]) -> None:
        members = [k.encode("utf-8") for k in keys]

        def queue(pipe: Any) -> None:
            pipe.unlink(*(self.record_key(k) for k in keys))
            for index in self.indexes:
                pipe.zrem(index, *members)
            self.wrote(pipe, members)

        await self.commit("delete records", queue)

    async def _drop(self) -> None:
        """Delete every record listed in ``ids_key``, then the indexes, a page at a time."""
        size, indexes = self.options.batch_size, self.indexes
        while True:
            async with self.errors("drop"):
                members = await self.client.zrange(self.ids_key, 0, size - 1)
            if not members:
                await self.commit("drop", lambda pipe: pipe.delete(*indexes))
                return

            def queue(pipe: Any, members: list[bytes] = members) -> None:
                pipe.unlink(*(self._record_prefix + m for m in members))
                for index in indexes:
                    pipe.zrem(index, *members)
                self.wrote(pipe, members)

            await self.commit("drop", queue)

    def wrote(self, pipe: Any, members: list[bytes]) -> None:
        """Queues what a store keeps per write at the end of each write's
        ``MULTI`` (the doc-status generation and change feed), so it applies with
        the write; ``members`` are the ids it wrote or deleted."""
