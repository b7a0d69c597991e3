"""A scriptable HTTP server on 127.0.0.1 for testing remote model adapters
with their real client libraries: no patching, the real wire protocol.

A plugin subclasses ``LoopbackServer`` with its service's routes (OpenAI's
``/chat/completions``, Ollama's ``/api/chat``, ``/rerank``...) and error body;
this module does the rest::

    with MyServer(prefix="/v1") as server:           # listens on a free port
        server.fail(429, retry_after=1)               # next request: 429 + Retry-After
        server.fail(None, delay=2)                    # then one slow answer
        ...use server.url as the adapter's base_url...
        server.requests[1].started - server.requests[0].answered   # server-side times
        server.max_in_flight                          # most requests handled at once

Every request is recorded (method, path, query, headers, JSON body, times);
answers come from the deterministic helpers below, so a test can predict them.
Threads, not asyncio: the server outlives any one test's event loop.
Not pytest-httpserver: its server (werkzeug's) closes every connection, where
real services keep them alive; it records no server-side times or calls in
flight, so the faults and the recording here would stay; and it is no faster
(``benchmarks/findings.md``).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from ragkit.ids import digest
from ragkit.testing.doubles import HashEmbedder, words


@dataclass
class Recorded:
    """One request as the server saw it; times are ``time.monotonic()``."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    """Header names in lower case."""
    body: Any
    started: float
    answered: float | None = None
    """When the server began to send its answer: a client cannot have read it before."""
    finished: float | None = None
    status: int | None = None


@dataclass
class Reply:
    """An answer: JSON (``json``) or a body streamed in chunks (``chunks``)."""

    status: int = 200
    json: Any = None
    chunks: Iterable[bytes] | None = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    """Drop the connection after this many chunks, mid-body (a crashed server)."""
    raw: bytes | None = None
    """A body sent as is (a malformed answer, e.g. a proxy's HTML page)."""


@dataclass
class Fault:
    """What to do instead of (or before) answering the next matching request."""

    status: int | None = 500
    """``None``: answer normally after ``delay``."""
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "injected failure"
    path: str | None = None
    """Only requests to this route (e.g. ``"/embeddings"``); ``None``: any."""
    cut_after: int | None = None
    """With ``status=None``: stream only this many chunks, then drop the connection."""
    malformed: bytes | None = None
    """Answer 200 with this body instead of the protocol's JSON."""


Route = Callable[[Recorded], Reply]
_SHARED_LOCK = threading.Lock()


class LoopbackServer:
    """Base of the protocol servers: routing, faults, auth and recording."""

    _shared: ClassVar[dict[type, LoopbackServer]] = {}

    def __init__(
        self,
        prefix: str = "",
        *,
        api_key: str | None = None,
        models: set[str] | None = None,
        latency: float = 0.0,
        chunk_delay: float = 0.0,
    ) -> None:
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.api_key = api_key
        self.models = models
        """Model names served; ``None``: any name. Others get ``unknown_model``'s 404."""
        self.latency = latency
        """Seconds every answer is held back (makes concurrency observable)."""
        self.chunk_delay = chunk_delay
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- what subclasses define -----------------------------------------------------

    def routes(self) -> Mapping[tuple[str, str], Route]:
        """``(method, path after the prefix) -> handler``."""
        return {}

    def error_reply(self, status: int, message: str) -> Reply:
        """An error in the protocol's own format."""
        return Reply(status, json={"error": {"message": message}})

    def authorized(self, request: Recorded) -> bool:
        if self.api_key is None:
            return True
        return request.headers.get("authorization") == f"Bearer {self.api_key}"

    def not_found_message(self, model: str) -> str:
        return f"model {model!r} not found"

    def unknown_model(self, body: Any) -> Reply | None:
        """The 404 for a body naming a model the server does not serve, else ``None``."""
        model = body.get("model") if isinstance(body, dict) else None
        if self.models is not None and model not in self.models:
            return self.error_reply(404, self.not_found_message(str(model)))
        return None

    # -- scripting ------------------------------------------------------------------

    def fail(
        self,
        status: int | None = 500,
        *,
        times: int = 1,
        retry_after: float | None = None,
        delay: float = 0.0,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
        message: str | None = None,
        cut_after: int | None = None,
        malformed: bytes | None = None,
    ) -> None:
        """Queue ``times`` faults: answer ``status`` (``None``: answer normally)
        after ``delay`` seconds, with a ``Retry-After`` header if given; with
        ``cut_after``, a streamed answer breaks off after that many chunks; with
        ``malformed``, a 200 answer carries that body instead of valid JSON."""
        extra = dict(headers or {})
        if retry_after is not None:
            extra["Retry-After"] = f"{retry_after:g}"
        text = message or f"injected HTTP {status}"
        with self._lock:
            self._faults += [Fault(status, delay, extra, text, path, cut_after, malformed) for _ in range(times)]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self.max_in_flight = self.in_flight

    def bodies(self, path: str) -> list[Any]:
        """JSON bodies of the recorded requests to ``path`` (after the prefix)."""
        return [r.body for r in self.requests if r.path == self.prefix + path]

    # -- lifecycle ------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started: call start() or use `with server:`")
        return self._httpd.server_address[1]

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """Root URL plus prefix: what an adapter's ``base_url`` should be."""
        return self.root + self.prefix

    @classmethod
    def shared(cls, **kwargs: Any) -> Self:
        """One started server of this class per process, for the contract suite
        (``contract_options``); ``kwargs`` count only on the first call."""
        with _SHARED_LOCK:
            server = cls._shared.get(cls)
            if server is None:
                server = cls._shared[cls] = cls(**kwargs).start()
            return server  # type: ignore[return-value]

    def start(self) -> Self:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self), bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.request_queue_size = 128
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- handling -------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        request = self._record(handler)
        try:
            reply = self._reply(request)
            request.status, request.answered = reply.status, time.monotonic()
            _send(handler, reply, self.chunk_delay)
        except OSError:  # the client gave up (timeout) or closed the connection
            handler.close_connection = True
        finally:
            with self._lock:
                self.in_flight -= 1
            request.finished = time.monotonic()

    def _record(self, handler: BaseHTTPRequestHandler) -> Recorded:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        request = Recorded(
            method=handler.command,
            path=parts.path,
            query=dict(parse_qsl(parts.query)),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=_json_or_text(raw),
            started=time.monotonic(),
        )
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return request

    def _reply(self, request: Recorded) -> Reply:
        route = request.path[len(self.prefix) :] if request.path.startswith(self.prefix) else None
        fault = self._next_fault(route)
        time.sleep(self.latency + (fault.delay if fault else 0.0))
        if fault is not None and fault.malformed is not None:
            return Reply(200, raw=fault.malformed, headers=dict(fault.headers))
        if fault is not None and fault.status is not None:
            reply = self.error_reply(fault.status, fault.message)
            reply.headers.update(fault.headers)
            return reply
        if not self.authorized(request):
            return self.error_reply(401, "Incorrect API key provided")
        handler = self.routes().get((request.method, route or ""))
        if handler is None:
            return self.error_reply(404, f"no route for {request.method} {request.path}")
        reply = handler(request)
        reply.cut_after = fault.cut_after if fault is not None else None
        return reply

    def _next_fault(self, route: str | None) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if fault.path is None or fault.path == route:
                    return self._faults.pop(i)
        return None


class CannedServer(LoopbackServer):
    """Answers ``reply`` to every ``method path`` request (after the prefix):
    the odd or broken answers real servers give, for an adapter's own tests.
    Faults, recording and auth work as on the protocol servers."""

    def __init__(self, prefix: str = "", *, method: str = "POST", path: str = "/", **kwargs: Any) -> None:
        super().__init__(prefix, **kwargs)
        self.route = (method, path)
        self.reply = Reply()

    def routes(self) -> Mapping[tuple[str, str], Route]:
        return {self.route: lambda request: self.reply}

    def answer(self, body: Any, status: int = 200) -> None:
        """Answer ``body`` from now on: JSON, or a str sent as the bytes it is."""
        if isinstance(body, str):
            self.reply = Reply(status, chunks=[body.encode()], content_type="text/html")
        else:
            self.reply = Reply(status, json=body)


def _handler_for(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real services speak
        # Headers and body leave in two writes: with Nagle's algorithm the body waits for the
        # client's delayed ACK of the headers, ~40 ms a request on a kept-alive connection.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            server._handle(self)

        do_POST = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _send(handler: BaseHTTPRequestHandler, reply: Reply, chunk_delay: float) -> None:
    handler.send_response(reply.status)
    handler.send_header("Content-Type", reply.content_type)
    for name, value in reply.headers.items():
        handler.send_header(name, value)
    if reply.chunks is None:
        body = reply.raw if reply.raw is not None else json.dumps(reply.json, ensure_ascii=False).encode("utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        return
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for sent, chunk in enumerate(reply.chunks):
        if sent == reply.cut_after:
            handler.close_connection = True  # no final chunk: the body is cut short
            return
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        handler.wfile.flush()
        time.sleep(chunk_delay)
    handler.wfile.write(b"0\r\n\r\n")


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode("utf-8", "replace")


# -- deterministic answers ---------------------------------------------------------------


def count_tokens(*texts: str) -> int:
    """The servers' token count: words (CJK characters count one each)."""
    return sum(len(words(t)) for t in texts)


def fake_answer(
    messages: Sequence[Mapping[str, Any]], *, json_mode: bool = False, max_tokens: int | None = None
) -> str:
    """A reply that depends only on the messages: a digest of all of them,
    then the words of the last one (at most ``max_tokens`` of them)."""
    tag = digest(json.dumps(list(messages), sort_keys=True, ensure_ascii=False))[:8]
    said = words(str(messages[-1].get("content", ""))) if messages else []
    if json_mode:
        return json.dumps({"reply": tag, "words": said[:max_tokens]}, ensure_ascii=False)
    return " ".join([f"reply-{tag}:", *said][: max_tokens or None])


def pieces(text: str, size: int = 5) -> list[str]:
    """``text`` cut into pieces of ``size`` characters, as a stream sends it."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


@functools.lru_cache(maxsize=8)
def _hasher(dimension: int) -> HashEmbedder:
    return HashEmbedder({"dimension": dimension})


def fake_embedding(text: str, dimension: int) -> list[float]:
    """A unit vector from the words of ``text`` (shared words, close vectors)."""
    return _hasher(dimension)._row(text).astype(np.float64).tolist()


def fake_relevance(query: str, document: str) -> float:
    """The fraction of the query's distinct words found in the document."""
    q = set(words(query))
    return len(q & set(words(document))) / len(q) if q else 0.0


async def check_refused_stream_records_no_call(llm: Any, server: LoopbackServer, request: Any) -> None:
    """A stream the server refuses (HTTP 400) before its first piece raises
    ``ModelError`` and leaves no call in ``llm.usage``: the adapters' own tests."""
    from ragkit.errors import ModelError

    server.fail(400)
    try:
        _ = [piece async for piece in llm.stream(request)]
    except ModelError:
        pass
    else:
        raise AssertionError("a stream the server refused did not raise ModelError")
    assert list(llm.usage.calls) == [] and llm.usage.by_role() == {}, "a refused stream recorded a call"
