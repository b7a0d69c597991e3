"""A loopback Bolt server for the failures FalkorDB's listener cannot show: one
that refuses the credentials, one that never answers a query, one that never
answers at all. It speaks Bolt 5.0 (handshake, chunked PackStream messages) to
the real ``neo4j`` driver, and knows nothing of Cypher.

``BoltStub(mode)`` runs in a thread; ``uri`` is ``bolt://127.0.0.1:<port>``.

- ``silent``: accepts connections and never writes a byte.
- ``refuse-auth``: answers ``HELLO`` (which carries the credentials in 5.0)
  with ``Neo.ClientError.Security.Unauthorized``, as Neo4j does.
- ``hang-after-probe``: accepts ``HELLO``, fails the first query (the
  adapter's parameter probe, as a server that cannot take parameters would),
  then never answers a query or a transaction's ``BEGIN``: a store opens, and
  its every read and write waits.
- ``failing``: accepts ``HELLO`` and transactions, and fails every query
  with a syntax error (the first is the probe: a store opens).
- ``neo4j``: answers as Neo4j 5.26 would the adapter's probes (``RETURN $p``
  echoes its parameter, ``dbms.components()`` names the version), so a store
  takes it for Neo4j (parameters, ``IF NOT EXISTS``); every other query
  succeeds with the rows ``rows(query, params)`` gives (none by default), or
  fails with its message if that raises (``StubFailure`` where a server would
  refuse). What the adapter sends to a real Neo4j is then read from ``fields``.
  ``versions`` are the ones ``dbms.components()`` names (``None``: the procedure
  fails, as on a server that is not Neo4j); ``echo(value)`` is what ``RETURN $p``
  returns (a server pasting parameters into the query would change it).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

MAGIC = b"\x60\x60\xb0\x17"
BOLT_5_0 = b"\x00\x00\x00\x05"
HELLO, GOODBYE, RESET, RUN, PULL = 0x01, 0x02, 0x0F, 0x10, 0x3F
BEGIN, COMMIT, ROLLBACK = 0x11, 0x12, 0x13
SUCCESS, FAILURE, IGNORED, RECORD = 0x70, 0x7F, 0x7E, 0x71
VERSION = "5.26.0"
UNAUTHORIZED = "Neo.ClientError.Security.Unauthorized"
SYNTAX_ERROR = "Neo.ClientError.Statement.SyntaxError"


def pack(value: Any) -> bytes:
    """PackStream for the types the stub sends: None, bool, int, str, list, dict (small ones)."""
    if value is None or isinstance(value, bool):
        return {None: b"\xc0", False: b"\xc2", True: b"\xc3"}[value]
    if isinstance(value, int):
        return struct.pack(">bq", -53, value)  # 0xCB: a 64-bit int
    if isinstance(value, str):
        data = value.encode("utf-8")
        head = bytes([0x80 + len(data)]) if len(data) < 16 else b"\xd1" + struct.pack(">H", len(data))
        return head + data
    if isinstance(value, list):
        return bytes([0x90 + len(value)]) + b"".join(pack(v) for v in value)
    if isinstance(value, dict):
        return bytes([0xA0 + len(value)]) + b"".join(pack(k) + pack(v) for k, v in value.items())
    raise TypeError(type(value))


def unpack(data: bytes, at: int = 0) -> tuple[Any, int]:
    """One PackStream value of ``data`` from ``at``, and where the next begins."""
    marker = data[at]
    at += 1
    high = marker & 0xF0
    if marker < 0x80:
        return marker, at  # tiny int
    if marker >= 0xF0:
        return marker - 0x100, at  # negative tiny int
    sized = {0xD0: (1, "s"), 0xD1: (2, "s"), 0xD2: (4, "s"), 0xD4: (1, "l"), 0xD5: (2, "l"),
             0xD8: (1, "m"), 0xD9: (2, "m")}
    ints = {0xC8: ">b", 0xC9: ">h", 0xCA: ">i", 0xCB: ">q"}
    if marker in (0xC0, 0xC2, 0xC3):
        return {0xC0: None, 0xC2: False, 0xC3: True}[marker], at
    if marker == 0xC1:
        return struct.unpack_from(">d", data, at)[0], at + 8
    if marker in ints:
        return struct.unpack_from(ints[marker], data, at)[0], at + struct.calcsize(ints[marker])
    if high in (0x80, 0x90, 0xA0, 0xB0):
        size, kind = marker & 0x0F, {0x80: "s", 0x90: "l", 0xA0: "m", 0xB0: "t"}[high]
    elif marker in sized:
        width, kind = sized[marker]
        size, at = int.from_bytes(data[at:at + width], "big"), at + width
    else:
        raise ValueError(f"PackStream marker {marker:#x} is not handled by the stub")
    if kind == "s":
        return data[at:at + size].decode("utf-8"), at + size
    if kind == "t":
        at += 1  # the struct's signature byte: its fields follow
    items = []
    for _ in range(size * (2 if kind == "m" else 1)):
        item, at = unpack(data, at)
        items.append(item)
    return (dict(zip(items[::2], items[1::2])) if kind == "m" else items), at


def message(signature: int, fields: dict[str, Any] | list[Any] | None = None) -> bytes:
    body = bytes([0xB0, signature]) if fields is None else bytes([0xB1, signature]) + pack(fields)
    return struct.pack(">H", len(body)) + body + b"\x00\x00"


class StubFailure(Exception):
    """Raised by a ``rows`` function: the query fails, with this message."""


class BoltStub:
    def __init__(
        self, mode: str, rows: Callable[[str, dict], list[list[Any]]] | None = None, *,
        versions: tuple[str, ...] | None = (VERSION,), echo: Callable[[Any], Any] = lambda value: value,
    ) -> None:
        assert mode in ("silent", "refuse-auth", "hang-after-probe", "failing", "neo4j"), mode
        self.mode = mode
        self.rows = rows or (lambda query, params: [])
        self.versions, self.echo = versions, echo
        self.received: list[int] = []
        """Signatures of the messages clients sent, in order."""
        self.fields: list[tuple[int, list[Any]]] = []
        """Each message clients sent: its signature and fields, in order."""
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.uri = f"bolt://127.0.0.1:{self._listener.getsockname()[1]}"
        self._clients: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            self._clients.append(client)
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            if self.mode == "silent" or self._read(client, 20)[:4] != MAGIC:
                return
            client.sendall(BOLT_5_0)
            failed = False  # until RESET, a failed query's followers are IGNORED
            pending: list[list[Any]] = []  # a neo4j RUN's rows, sent at its PULL
            while (got := self._message(client)) is not None:
                signature, fields = got
                self.received.append(signature)
                if signature == HELLO and self.mode == "refuse-auth":
                    client.sendall(message(FAILURE, {
                        "code": UNAUTHORIZED,
                        "message": "The client is unauthorized due to authentication failure.",
                    }))
                elif signature == HELLO:
                    client.sendall(message(SUCCESS, {"server": "Neo4j/5.26.0", "connection_id": "bolt-stub"}))
                elif signature == GOODBYE:
                    return
                elif signature == RESET:
                    failed = False
                    client.sendall(message(SUCCESS, {}))
                elif failed:
                    client.sendall(message(IGNORED))
                elif self.mode == "neo4j":
                    try:
                        pending = self._answer(client, signature, fields, pending)
                    except Exception as exc:  # StubFailure, or a rows function's KeyError: a failed query, not a hang
                        failed = True
                        client.sendall(message(FAILURE, {"code": SYNTAX_ERROR, "message": str(exc)}))
                elif signature == RUN and (self.mode == "failing" or self.received.count(RUN) == 1):
                    failed = True
                    client.sendall(message(FAILURE, {"code": SYNTAX_ERROR, "message": "the stub runs no query"}))
                elif self.mode == "failing":
                    client.sendall(message(SUCCESS, {}))  # BEGIN, COMMIT, ROLLBACK
                # hang-after-probe: no answer to anything else (a later RUN, BEGIN).
        except OSError:
            return

    def _answer(self, client: socket.socket, signature: int, fields: list[Any],
                pending: list[list[Any]]) -> list[list[Any]]:
        """Neo4j's replies: a RUN's fields, then at its PULL its rows; the rows still to send."""
        if signature == RUN:
            query, params = fields[:2]
            if query.startswith("RETURN $p"):
                names, pending = ["v"], [[self.echo(params["p"])]]
            elif query.startswith("CALL dbms.components()"):
                if self.versions is None:
                    raise StubFailure("There is no procedure with the name `dbms.components` registered")
                names, pending = ["name", "versions"], [["Neo4j Kernel", list(self.versions)]]
            else:
                pending = self.rows(query, params)
                names = [f"c{i}" for i in range(len(pending[0]) if pending else 0)]
            client.sendall(message(SUCCESS, {"fields": names, "t_first": 0, "qid": 0}))
            return pending
        if signature == PULL:
            for row in pending:
                client.sendall(message(RECORD, row))
            client.sendall(message(SUCCESS, {"has_more": False, "t_last": 0, "type": "rw", "db": "neo4j"}))
            return []
        client.sendall(message(SUCCESS, {"bookmark": "stub:1"} if signature == COMMIT else {}))  # BEGIN, ROLLBACK
        return pending

    @staticmethod
    def _read(client: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            part = client.recv(n - len(data))
            if not part:
                raise OSError("closed")
            data += part
        return data

    def _message(self, client: socket.socket) -> tuple[int, list[Any]]:
        """The next message's signature and fields (its chunks read to the end
        marker); they also go to ``fields``."""
        body = b""
        while True:
            (size,) = struct.unpack(">H", self._read(client, 2))
            if size == 0:
                if body:
                    entry = (body[1], unpack(body)[0])
                    self.fields.append(entry)
                    return entry
                continue  # a NOOP chunk
            body += self._read(client, size)

    def sent(self, signature: int) -> list[list[Any]]:
        """The fields of every message of this kind clients sent."""
        return [fields for sig, fields in self.fields if sig == signature]

    def close(self) -> None:
        self._listener.close()
        for client in self._clients:
            client.close()
