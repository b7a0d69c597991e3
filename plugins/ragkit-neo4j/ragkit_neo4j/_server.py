"""One driver per server and event loop, shared by the stores using it, and
what the adapter learned about the server behind it.

Neo4j drivers are meant to be long-lived and shared; an ``AsyncDriver``'s
connections belong to the event loop that opened them. So stores of one loop
that point at the same server share one driver (reference-counted: the last
``close()`` closes it), and another loop gets its own.

What the server can do is probed once per driver, not guessed from its agent
string (FalkorDB's listener announces itself as ``Neo4j/5.13.0``):

- ``RETURN $p`` with a value holding a quote: a real server returns it; a
  server that pastes parameters into the query text unescaped fails. Such a
  server gets literals (``cypher.Binder``) instead of parameters.
- ``CALL dbms.components()``: Neo4j names itself and its version; from 4.4 on it
  has ``CREATE CONSTRAINT ... IF NOT EXISTS ... REQUIRE``. Other servers get an
  index created after looking in ``CALL db.indexes()``.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

from ragkit.errors import StoreError

log = logging.getLogger("ragkit_neo4j")

PROBE_VALUE = "ragkit'probe\\"


@dataclass(frozen=True)
class ServerInfo:
    """What a server supports, as probed."""

    agent: str
    product: str
    """``"neo4j"``, ``"falkordb-bolt"`` (a listener that pastes parameters
    unescaped) or ``"other"``."""
    version: str = ""
    inline_values: bool = False
    """Send values as escaped literals, never as parameters."""
    if_not_exists: bool = False
    """``CREATE CONSTRAINT|INDEX ... IF NOT EXISTS`` (and uniqueness constraints)."""
    goodbye_breaks_listener: bool = False
    """Close connections without Bolt's GOODBYE: FalkorDB's listener frees the
    client on GOODBYE without unregistering its socket, and the next connection
    to reuse that descriptor hangs in its handshake."""


def _version_at_least(version: str, wanted: tuple[int, int]) -> bool:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts) >= wanted


async def probe(driver: Any, database: str | None, forced: str) -> ServerInfo:
    """Ask the server what it supports (``forced``: the ``query_values`` option)."""
    info = await driver.get_server_info()
    agent = str(info.agent)
    params_ok = False
    if forced != "inline":
        try:
            async with driver.session(database=database) as session:
                record = await (await session.run("RETURN $p AS v", {"p": PROBE_VALUE})).single()
            params_ok = record is not None and record["v"] == PROBE_VALUE
        except Exception as exc:  # noqa: BLE001 - any failure means "not real parameters"
            log.debug("parameter probe failed on %s: %s: %s", agent, type(exc).__name__, exc)
    if not params_ok:  # also with query_values = "inline", which skips the probe: values go inline
        if forced == "parameters":
            raise StoreError(
                f"the server at {agent} does not return query parameters unchanged; "
                "set query_values = \"auto\" or \"inline\""
            )
        return ServerInfo(agent, "falkordb-bolt", inline_values=True, goodbye_breaks_listener=True)
    try:
        async with driver.session(database=database) as session:
            rows = await (
                await session.run("CALL dbms.components() YIELD name, versions RETURN name, versions")
            ).values()
    except Exception as exc:  # noqa: BLE001
        log.debug("dbms.components() failed on %s: %s: %s", agent, type(exc).__name__, exc)
        rows = []
    for name, versions in rows:
        if str(name).startswith("Neo4j"):
            version = str(versions[0]) if versions else ""
            return ServerInfo(agent, "neo4j", version, if_not_exists=_version_at_least(version, (4, 4)))
    return ServerInfo(agent, "other")


@dataclass(eq=False)
class SharedDriver:
    """A driver and its probed server, shared by the stores of one event loop."""

    key: tuple[Any, ...]
    driver: Any
    loop: asyncio.AbstractEventLoop
    """The loop its connections belong to (they hold it: a weak reference would gain nothing)."""
    users: int = 0
    info: ServerInfo | None = None
    schema_done: set[tuple[str | None, str]] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_drivers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], SharedDriver]] = (
    weakref.WeakKeyDictionary()
)


async def acquire(key: tuple[Any, ...], make_driver: Any, database: str | None, forced: str) -> SharedDriver:
    """The shared driver for ``key`` in the running loop (created and probed on
    first use); pair every call with ``release``."""
    loop = asyncio.get_running_loop()
    per_loop = _drivers.setdefault(loop, {})
    shared = per_loop.get(key)
    if shared is None:
        shared = per_loop[key] = SharedDriver(key, make_driver(), loop)
    shared.users += 1
    try:
        async with shared.lock:
            if shared.info is None:
                shared.info = await probe(shared.driver, database, forced)
    except BaseException:
        await release(shared)
        raise
    return shared


async def release(shared: SharedDriver) -> None:
    """Pairs ``acquire``. On another loop than the driver's, once that one has
    ended (``asyncio.run`` twice), there is nothing left to close."""
    ended = shared.loop.is_closed()
    if shared.loop is not asyncio.get_running_loop() and not ended:
        raise RuntimeError(
            "a Neo4j store was closed on another event loop than the one it opened on, whose "
            "connections it holds. Fix: close it on that loop (or after that loop has ended)"
        )
    shared.users -= 1
    if shared.users > 0:
        return
    per_loop = _drivers[shared.loop]  # made by acquire(), kept while the loop lives
    if per_loop.get(shared.key) is shared:
        del per_loop[shared.key]
    if ended:
        return
    if shared.info is not None and shared.info.goodbye_breaks_listener:
        _drop_connections(shared.driver)
    await shared.driver.close()


def _drop_connections(driver: Any) -> None:
    """Close the pool's sockets without GOODBYE (see ``ServerInfo``). Reaches
    into the driver's pool; if a driver version lays it out differently, the
    normal close (with GOODBYE) runs instead."""
    pool = getattr(driver, "_pool", None)
    connections = getattr(pool, "connections", None)
    if not isinstance(connections, dict):
        log.warning("cannot reach the driver's connections; closing with GOODBYE")
        return
    for conns in list(connections.values()):
        for conn in list(conns):
            kill = getattr(conn, "kill", None)
            if callable(kill):
                kill()
            else:
                log.warning("driver connection has no kill(); it will close with GOODBYE")
