"""A loopback TCP proxy in front of a real server that can be frozen: from
``freeze()`` on it passes no byte either way and closes nothing, so the
client's connections (and any it opens after) see a server that stopped
answering, as behind a dead network path or a paused host. ``freeze_on``
freezes it when the client sends bytes that start so (a protocol message:
the moment to stop answering); ``thaw()`` passes what it held and goes on.

``FreezingProxy(host, port)`` listens on 127.0.0.1 at ``proxy.port``, in threads.
"""

from __future__ import annotations

import socket
import threading
import time


class FreezingProxy:
    def __init__(self, host: str, port: int, freeze_on: bytes | None = None) -> None:
        self.upstream = (host, port)
        self.freeze_on = freeze_on
        self.frozen = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self.frozen.set()

    def thaw(self) -> None:
        self.freeze_on = None
        self.frozen.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:  # closed
                return
            self._sockets += [client, server]
            for source, target, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pipe, args=(source, target, upstream), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, upstream: bool) -> None:
        try:
            while data := source.recv(65536):
                if upstream and self.freeze_on is not None and data.startswith(self.freeze_on):
                    self.frozen.set()
                while self.frozen.is_set():  # held: the other side waits for it forever
                    time.sleep(0.05)
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                sock.close()

    def close(self) -> None:
        self._listener.close()
        for sock in self._sockets:
            sock.close()
