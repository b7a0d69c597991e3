"""A loopback HTTP proxy in front of a real Chroma server that records what
the client sends (method, path, headers): what the store tells the server
(its credentials, its extra headers) is then read at the server's door,
not from the client's private state.

``RecordingProxy(upstream, host=..., port=...)`` listens on ``host`` (any
loopback address) at ``port`` (default: a free one), in a thread; ``requests``
holds what came through.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class RecordingProxy:
    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0) -> None:
        target = urlsplit(upstream)
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the client expects

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.requests.append((self.command, self.path, dict(self.headers.items())))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                try:
                    upstream_conn.request(self.command, self.path, body=body or None, headers=headers)
                    reply = upstream_conn.getresponse()
                    data = reply.read()
                finally:
                    upstream_conn.close()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in HOP_BY_HOP | {"content-length"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.host, self.port = host, self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def header_values(self, name: str) -> set[str]:
        """Every value the client sent for header ``name`` (any case)."""
        return {v for _, _, headers in self.requests for k, v in headers.items() if k.lower() == name.lower()}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
