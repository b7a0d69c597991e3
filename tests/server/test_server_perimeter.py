"""The perimeter of ``ragkit serve`` (docs/server.md, "The perimeter"), on
live servers over loopback: no key means no start (unless keyless mode is
asked for, on loopback only); revoking every key closes the server; the Host
allow-list; the Origin check on state-changing routes; the key checked before
the body is read; bodies capped while they stream.

The body tests speak raw HTTP on a socket (``send_streaming``): the body is
sent piece by piece until the server answers, so the bytes the client had
sent by then say whether the server answered before reading the body. The
server's own process tells what it kept: its peak resident memory (VmHWM in
``/proc/<pid>/status``) and the bytes it wrote (``wchar`` in ``/proc/<pid>/io``:
an upload spooled to a temporary file is written there, and Python's
anonymous temporary files never show in a folder listing).

Troubleshooting: a refused start that hangs means the server started (the
helper kills it after 30 s); a body test whose ``sent`` equals the body's
size means the server read the whole body before answering.
"""

from __future__ import annotations

import http.client
import re
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from server_support import Server, client, free_port, make_keys, wait_job
from ragkit.server.keys import KeyStore

MiB = 1024 * 1024
W = "/w/alpha"
UI = "http://ui.example:8080"
LIMITS = {
    "RAGKIT_SERVER__MAX_UPLOAD_BYTES": str(MiB),
    "RAGKIT_SERVER__MAX_UPLOAD_FILES": "2",
    "RAGKIT_SERVER__MAX_BODY_BYTES": str(MiB),
    "RAGKIT_SERVER__ALLOWED_ORIGINS": UI,
}
UPLOAD_CAP = 2 * MiB + MiB
"""max_upload_files * max_upload_bytes + max_body_bytes, with LIMITS."""
CANARY = "Quillon Vashti keeps the brass ledger of Orrow Fen."
SOCKET_SLACK = 16 * MiB
"""What the kernel's socket buffers take in before the server reads: a client
that sent less than this had not finished a far larger body."""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[tuple[Server, object]]:
    """One server with keys, small body caps and one allowed origin (UI)."""
    working_dir = tmp_path_factory.mktemp("perimeter") / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    with Server(working_dir).start(extra_env=LIMITS) as server:
        yield server, keys


# -- Starting -----------------------------------------------------------------------------------------


def refused_start(working_dir: Path, *args: str, **env: str) -> tuple[int, str]:
    """``ragkit serve`` that must refuse to start: its exit status and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragkit", "serve", "--port", str(free_port()), *args],
        env={"RAGKIT_WORKING_DIR": str(working_dir), "PATH": "/usr/bin:/bin", **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the server started instead of refusing: {err[-2000:]}")
    return proc.returncode, err


def test_no_active_key_refuses_to_start(tmp_path):
    status, err = refused_start(tmp_path)
    assert status == 2 and "no active API key" in err, err
    assert "ragkit keys create" in err and "--allow-keyless" in err, "names both ways out"
    store = KeyStore(tmp_path / "server_keys.sqlite")
    assert store.revoke(store.create(["alpha"], "ann")[0].id)
    status, err = refused_start(tmp_path)
    assert status == 2 and "no active API key" in err, "a revoked key is no key"


@pytest.mark.parametrize("how", [("--allow-keyless",), ()])
def test_keyless_mode_off_loopback_refuses_to_start(tmp_path, how):
    env = {} if how else {"RAGKIT_SERVER__ALLOW_KEYLESS": "true"}
    status, err = refused_start(tmp_path, "--host", "0.0.0.0", *how, **env)
    assert status == 2, err
    assert "allow_keyless" in err and "loopback" in err and "'0.0.0.0'" in err, err
    assert "ragkit keys create" in err, "names the other way: keys"


def test_keyless_mode_serves_loopback_clients_only(tmp_path):
    """Opted in (no key used to mean this mode): a loopback client without a
    key reads everything; a key that is sent is still checked; a client behind
    a local proxy (``X-Forwarded-For``) is no loopback client; Host and Origin
    still hold (the issue's DNS rebinding and cross-site upload)."""
    with Server(tmp_path / "open").start(extra_env={"RAGKIT_SERVER__ALLOW_KEYLESS": "true"}) as server:
        with client(server, None) as c:
            assert c.get("/w/default/documents").status_code == 404, "a read creates no workspace"
            made = c.post("/w/default/documents/texts", json={"texts": ["Keyless mode writes too."]})
            assert made.status_code == 202 and wait_job(c, made.json()["url"])["state"] == "done"
            assert c.get("/w/default/documents").status_code == 200
            assert c.get("/metrics").status_code == 200
            forwarded = c.get("/w/default/documents", headers={"X-Forwarded-For": "203.0.113.7"})
            assert forwarded.status_code == 401 and "loopback" in forwarded.json()["error"]
            assert c.get("/w/default/documents", headers={"Host": "evil.example"}).status_code == 400
            r = c.post("/w/default/documents/upload", files=[("files", ("x.txt", CANARY.encode(), "text/plain"))],
                       headers={"Origin": "http://evil.example"})
            assert r.status_code == 403, r.text
            assert c.get("/w/default/documents").json()["total"] == 1, "nothing ingested"
        with client(server, "rk_not-a-key") as c:
            assert c.get("/w/default/documents").status_code == 401
        assert "keyless mode" in server.log_text()


# -- Revoking every key -------------------------------------------------------------------------------

ALL_ROUTES = [
    ("GET", f"{W}/documents", {}),
    ("POST", f"{W}/query", {"json": {"question": "Who keeps the brass ledger?"}}),
    ("POST", f"{W}/query/context", {"json": {"question": "Who keeps the brass ledger?", "mode": "naive"}}),
    ("POST", f"{W}/documents/texts", {"json": {"texts": ["written while closed"]}}),
    ("POST", f"{W}/documents/upload", {"files": [("files", ("w.txt", b"written while closed", "text/plain"))]}),
    ("GET", f"{W}/graph/export", {}),
    ("GET", "/metrics", {}),
    ("GET", "/ready", {}),
]


def test_revoking_every_key_closes_the_server(tmp_path):
    working_dir = tmp_path / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    with Server(working_dir).start() as server:
        with client(server, keys.writer) as c:
            done = wait_job(c, c.post(f"{W}/documents/texts", json={"texts": [CANARY]}).json()["url"])
            assert done["state"] == "done"
        env = {"RAGKIT_WORKING_DIR": str(working_dir), "PATH": "/usr/bin:/bin"}
        for key in KeyStore(working_dir / "server_keys.sqlite").list():
            revoked = subprocess.run([sys.executable, "-m", "ragkit", "keys", "revoke", key.id], env=env,
                                     capture_output=True, text=True, timeout=60)
            assert revoked.returncode == 0, revoked.stderr
        for token in (None, keys.admin, keys.writer):
            with client(server, token) as c:
                for method, path, kw in ALL_ROUTES:
                    r = c.request(method, path, **kw)
                    assert r.status_code == 401, (token is None, method, path, r.text)
                    assert "Quillon" not in r.text and "ragkit keys create" in r.text
        assert "no active API key" in server.log_text(), "the operator is told"
    assert KeyStore(working_dir / "server_keys.sqlite").active_count() == 0


# -- Host ---------------------------------------------------------------------------------------------

FOREIGN_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example", "localhost.evil.example:{port}"]


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
@pytest.mark.parametrize("method,path,kw", [
    ("GET", "/health", {}), ("GET", f"{W}/documents", {}), ("POST", f"{W}/query", {"json": {"question": "hi"}}),
])
def test_foreign_host_is_refused(guarded, host, method, path, kw):
    server, keys = guarded
    with client(server, keys.admin) as c:
        r = c.request(method, path, headers={"Host": host.format(port=server.port)}, **kw)
    assert r.status_code == 400, r.text
    assert "allowed_hosts" in r.json()["error"]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST:{port}", "localhost"])
def test_loopback_names_are_served(guarded, host):
    server, keys = guarded
    with client(server, keys.admin) as c:
        assert c.get("/health", headers={"Host": host.format(port=server.port)}).status_code == 200
        assert c.get(f"{W}/documents", headers={"Host": host.format(port=server.port)}).status_code == 200


# -- Origin -------------------------------------------------------------------------------------------

def _upload(c: httpx.Client, name: str, headers: dict) -> httpx.Response:
    return c.post(f"{W}/documents/upload", files=[("files", (name, CANARY.encode(), "text/plain"))], headers=headers)


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "null"},
    {"Origin": "https://127.0.0.1:{port}"},
])
def test_cross_site_upload_is_refused_and_ingests_nothing(guarded, headers):
    server, keys = guarded
    headers = {k: v.format(port=server.port) for k, v in headers.items()}
    saved = _saved(server)
    with client(server, keys.writer) as c:
        r = _upload(c, "refused.txt", headers)
        assert r.status_code == 403, r.text
        assert "allowed_origins" in r.json()["error"]
        assert c.post(f"{W}/query", json={"question": "hi"}, headers=headers).status_code == 403, "a query is a POST too"
        assert c.delete(f"{W}/documents/doc-x", headers=headers).status_code == 403
        assert c.get(f"{W}/documents", headers=headers).status_code == 200, "reads by GET are not refused"
        paths = {d["path"] for d in c.get(f"{W}/documents", params={"limit": 1000}).json()["documents"]}
    assert "refused.txt" not in paths
    assert _saved(server) <= saved, "nothing saved"


def _saved(server: Server) -> set[Path]:
    """Files under the workspace's upload folder (a job's, until it ends)."""
    uploads = server.working_dir / "alpha" / "server" / "uploads"
    return {p for p in uploads.rglob("*") if p.is_file()} if uploads.exists() else set()


@pytest.mark.parametrize("headers", [
    {},
    {"Origin": "http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"},
    {"Origin": UI, "Sec-Fetch-Site": "cross-site"},
])
def test_same_origin_allowed_origin_and_no_origin_pass(guarded, headers):
    server, keys = guarded
    headers = {k: v.format(port=server.port) for k, v in headers.items()}
    with client(server, keys.writer) as c:
        r = _upload(c, "accepted.txt", headers)
        assert r.status_code == 202, r.text
        assert wait_job(c, r.json()["url"])["state"] == "done"


# -- The key before the body, and body caps ------------------------------------------------------------


@dataclass
class Answer:
    status: int
    text: str
    sent: int
    """Body bytes the client had sent when the answer arrived."""


def send_streaming(port: int, path: str, headers: dict, pieces: Iterator[bytes], length: int | None) -> Answer:
    """POST a body piece by piece (``Content-Length: length``, or chunked when
    ``None``), stopping as soon as the server answers."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in headers.items()), framing]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    sock.setblocking(False)
    sent = 0
    frames = (p if length is not None else b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    try:
        for frame in frames:
            if not _send_unless_answered(sock, frame):
                break
            sent += len(frame)
        else:
            if length is None:
                _send_unless_answered(sock, b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed: its answer is read below
    sock.settimeout(60)
    response = http.client.HTTPResponse(sock, method="POST")
    response.begin()
    text = response.read().decode()
    sock.close()
    return Answer(response.status, text, sent)


def _send_unless_answered(sock: socket.socket, data: bytes) -> bool:
    """Send ``data`` on a non-blocking socket; ``False`` as soon as an answer arrives instead."""
    view = memoryview(data)
    while view:
        readable, writable, _ = select.select([sock], [sock], [], 60)
        assert readable or writable, "the server neither read nor answered for 60 s"
        if readable:
            return False
        try:
            view = view[sock.send(view):]
        except BlockingIOError:
            pass
    return True


def body(size: int, head: bytes, tail: bytes) -> Iterator[bytes]:
    piece = b"x" * (1 << 16)
    yield head
    left = size - len(head) - len(tail)
    while left > 0:
        yield piece[:left]
        left -= len(piece)
    yield tail


def multipart(size: int) -> Iterator[bytes]:
    head = b'--B\r\nContent-Disposition: form-data; name="files"; filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n'
    return body(size, head, b"\r\n--B--\r\n")


def json_body(size: int) -> Iterator[bytes]:
    return body(size, b'{"question": "x", "pad": "', b'"}')


MULTIPART = {"Content-Type": "multipart/form-data; boundary=B"}
JSON = {"Content-Type": "application/json"}


def usage(server: Server) -> tuple[int, int]:
    """The server process's peak resident memory and bytes written, so far."""
    pid = server.proc.pid
    hwm = int(re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text()).group(1)) * 1024
    wchar = int(re.search(r"wchar: (\d+)", Path(f"/proc/{pid}/io").read_text()).group(1))
    return hwm, wchar


@pytest.mark.parametrize("path,headers,make,size", [
    (f"{W}/documents/upload", MULTIPART, multipart, 300 * MiB),
    (f"{W}/query", JSON, json_body, 200 * MiB),
])
def test_no_key_is_refused_before_the_body_is_read(guarded, path, headers, make, size):
    server, _ = guarded
    hwm, wrote = usage(server)
    answer = send_streaming(server.port, path, headers, make(size), size)
    hwm_after, wrote_after = usage(server)
    assert answer.status == 401 and "ragkit keys create" in answer.text, answer
    assert answer.sent < SOCKET_SLACK, f"answered after {answer.sent} of {size} bytes"
    assert wrote_after - wrote < MiB, "nothing spooled"
    assert hwm_after - hwm < 64 * MiB, f"peak memory rose by {(hwm_after - hwm) // MiB} MiB"


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize("path,headers,make,cap,setting", [
    (f"{W}/documents/upload", MULTIPART, multipart, UPLOAD_CAP, "max_upload_files * max_upload_bytes + max_body_bytes"),
    (f"{W}/query", JSON, json_body, MiB, "[server] max_body_bytes"),
    (f"{W}/documents/texts", JSON, json_body, 2 * MiB, "max_upload_bytes + max_body_bytes"),
])
def test_body_over_the_cap_is_413_while_it_streams(guarded, declared, path, headers, make, cap, setting):
    server, keys = guarded
    size = 64 * MiB
    hwm, wrote, saved = *usage(server), _saved(server)
    auth = {**headers, "Authorization": f"Bearer {keys.writer}"}
    answer = send_streaming(server.port, path, auth, make(size), size if declared else None)
    hwm_after, wrote_after = usage(server)
    assert answer.status == 413, answer
    assert f"limit of {cap} bytes" in answer.text and setting in answer.text, answer.text
    assert answer.sent < (0 if declared else cap) + SOCKET_SLACK, f"answered after {answer.sent} of {size} bytes"
    assert wrote_after - wrote < cap + MiB, "nothing over the cap spooled"
    assert hwm_after - hwm < 48 * MiB, f"peak memory rose by {(hwm_after - hwm) // MiB} MiB"
    assert _saved(server) <= saved, "nothing saved"


def test_chunked_body_under_the_cap_is_served(guarded):
    server, keys = guarded
    payload = b"Chunked uploads are counted as they stream. " * 1000
    head = b'--B\r\nContent-Disposition: form-data; name="files"; filename="chunked.txt"\r\nContent-Type: text/plain\r\n\r\n'
    with client(server, keys.writer) as c:
        r = c.post(f"{W}/documents/upload", content=iter([head, payload, b"\r\n--B--\r\n"]), headers=MULTIPART)
        assert r.status_code == 202, r.text
        assert "content-length" not in r.request.headers, "sent chunked"
        assert wait_job(c, r.json()["url"])["state"] == "done"


def test_refusals_keep_the_chat_protocols_shape(guarded):
    """The perimeter answers the OpenAI routes as the OpenAI client expects."""
    server, keys = guarded
    url = f"{server.url}{W}/v1/chat/completions"
    refused = httpx.post(url, json={"model": "ragkit:naive", "messages": [{"role": "user", "content": "hi"}]})
    assert refused.status_code == 401 and "ragkit keys create" in refused.json()["error"]["message"]
    over = httpx.post(url, content=b"x" * (2 * MiB), headers={**JSON, "Authorization": f"Bearer {keys.reader}"})
    assert over.status_code == 413 and "max_body_bytes" in over.json()["error"]["message"]
    ollama = httpx.post(f"{server.url}{W}/api/chat", json={"model": "ragkit:naive", "messages": []})
    assert ollama.status_code == 401 and "ragkit keys create" in ollama.json()["error"]
