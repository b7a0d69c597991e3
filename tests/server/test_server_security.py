"""Security acceptance: keys (401/403), scopes, workspace names, secrets."""

from __future__ import annotations

import http.client
import re
import subprocess
import sys

import pytest

from server_support import LEAK_CANARY, client
from ragkit.server.app import PUBLIC_PATHS, create_app, route_table
from ragkit.server.webui import SHELL
from ragkit.settings import Settings

SAMPLE = {"workspace": "alpha", "job_id": "abc123", "doc_id": "doc-x"}


def _routes():
    app = create_app(Settings(working_dir="unused-never-opened"))
    routes = list(route_table(app))
    schema = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    assert schema <= set(routes), "route_table sees every route of the schema"
    assert len(routes) > 25
    for method, path in routes:
        yield method, path, True


def test_public_routes_are_only_liveness_the_api_description_and_the_web_ui_shell():
    public = {path for _, path, _ in _routes() if path in PUBLIC_PATHS | {SHELL}}
    assert public == {"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/"}


@pytest.mark.parametrize("method,path", [(m, p) for m, p, _ in _routes() if p not in PUBLIC_PATHS | {SHELL}])
def test_every_route_needs_a_key(served, method, path):
    server, keys = served
    url = re.sub(r"\{(\w+)(:[^}]*)?\}", lambda m: SAMPLE.get(m.group(1), "x"), path)  # any path parameter
    for headers in ({}, {"Authorization": "Bearer rk_not-a-key"}, {"X-API-Key": "rk_wrong"}):
        with client(server, None) as c:
            r = c.request(method, url, headers=headers)
        assert r.status_code == 401, (method, url, headers, r.text)
        assert "ragkit keys create" in r.text  # the chat routes wrap errors in their protocol's shape


WRITES = [
    ("POST", "/w/{ws}/documents/texts", {"json": {"texts": ["hello there"]}}),
    ("POST", "/w/{ws}/documents/upload", {"files": [("files", ("a.txt", b"hi", "text/plain"))]}),
    ("DELETE", "/w/{ws}/documents/doc-x", {}),
    ("POST", "/w/{ws}/documents/delete", {"json": {"ids": ["doc-x"]}}),
    ("POST", "/w/{ws}/documents/retry", {"json": {"ids": ["doc-x"]}}),
    ("POST", "/w/{ws}/graph/entities", {"json": {"name": "X"}}),
    ("PATCH", "/w/{ws}/graph/entity", {"json": {"name": "X", "description": "d"}}),
    ("DELETE", "/w/{ws}/graph/entity?name=X", {}),
    ("POST", "/w/{ws}/graph/merge", {"json": {"sources": ["X"], "target": "Y"}}),
    ("POST", "/w/{ws}/graph/relations", {"json": {"source": "X", "target": "Y"}}),
    ("PATCH", "/w/{ws}/graph/relation", {"json": {"source": "X", "target": "Y", "weight": 2}}),
    ("DELETE", "/w/{ws}/graph/relation?source=X&target=Y", {}),
]
READS = [
    ("GET", "/w/{ws}/documents", {}),
    ("POST", "/w/{ws}/query", {"json": {"question": "hi"}}),
    ("GET", "/w/{ws}/graph/export", {}),
    ("POST", "/w/{ws}/v1/chat/completions", {"json": {"model": "ragkit:naive", "messages": [{"role": "user", "content": "hi"}]}}),
    ("POST", "/w/{ws}/api/chat", {"json": {"model": "ragkit:naive", "messages": [{"role": "user", "content": "hi"}], "stream": False}}),
    ("POST", "/w/{ws}/mcp", {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}),
]


def test_every_write_route_is_in_the_scope_table():
    written = {(m, p.split("?")[0].replace("{ws}", "{workspace}")) for m, p, _ in WRITES}
    app_writes = {(m, p) for m, p, _ in _routes() if p.startswith("/w/") and m in ("POST", "PATCH", "DELETE", "PUT")}
    reads = {"/query", "/query/stream", "/query/context", "/query/prompt",  # POST, but they only read
             "/api/chat", "/api/generate", "/api/show", "/v1/chat/completions",
             "/mcp"}  # JSON-RPC: its write tool checks the write scope per call (tests/mcp)
    app_writes -= {("POST", "/w/{workspace}" + p) for p in reads}
    assert {(m, p.replace("doc-x", "{doc_id}")) for m, p in written} == app_writes


@pytest.mark.parametrize("method,path,kw", WRITES)
def test_read_scope_cannot_write(served, method, path, kw):
    server, keys = served
    with client(server, keys.reader) as c:
        r = c.request(method, path.format(ws="alpha"), **kw)
    assert r.status_code == 403, r.text
    assert r.json() == {"error": "this key may not use this workspace with this scope"}


@pytest.mark.parametrize("method,path,kw", WRITES + READS)
def test_other_workspace_is_403_with_one_body_whether_it_exists_or_not(served, method, path, kw):
    server, keys = served
    (server.working_dir / "alpha").mkdir(exist_ok=True)
    with client(server, keys.other) as c:
        existing = c.request(method, path.format(ws="alpha"), **kw)
        missing = c.request(method, path.format(ws="nosuchws"), **kw)
    assert existing.status_code == missing.status_code == 403
    assert existing.content == missing.content
    assert not (server.working_dir / "nosuchws").exists()


TRAVERSALS = ["..", "%2e%2e", "%2E%2E", "a%2Fb", "a%2fb%2f..", "." , "%00", "a%00b", "a" * 65, "-lead", "sp%20ace", "%C3%A9"]


@pytest.mark.parametrize("name", TRAVERSALS)
def test_bad_workspace_names_are_400_and_write_nothing(served, name):
    server, keys = served
    before = sorted(p.name for p in server.working_dir.parent.iterdir())
    for method, path, body in (("POST", f"/w/{name}/documents/texts", b'{"texts": ["escape"]}'),
                               ("GET", f"/w/{name}/documents", None)):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request(method, path, body=body, headers={"Authorization": f"Bearer {keys.admin}", "Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read().decode()
        conn.close()
        assert response.status == 400, (path, payload)
        assert "invalid workspace name" in payload and "1-64 lowercase letters" in payload
    assert sorted(p.name for p in server.working_dir.parent.iterdir()) == before, "nothing beside working_dir"
    # Inside it, only workspaces (valid names) and the keys file:
    assert all(re.fullmatch(r"[A-Za-z0-9][\w-]{0,63}|server_keys\.sqlite.*", p.name) for p in server.working_dir.iterdir())


def test_revoked_key_is_refused(served):
    from ragkit.server.keys import KeyStore

    server, _ = served
    store = KeyStore(server.working_dir / "server_keys.sqlite")
    key, token = store.create(["alpha"], "tmp", [], "read")
    with client(server, token) as c:
        assert c.get("/w/alpha/documents").status_code == 200
        assert store.revoke(key.id)
        assert c.get("/w/alpha/documents").status_code == 401


def test_secrets_never_in_logs_or_bodies(served):
    server, keys = served
    with client(server, keys.admin) as c:
        bodies = [
            c.post("/w/alpha/query", json={"question": "x", "top_k": LEAK_CANARY}).text,
            c.post("/w/alpha/query", json={"question": "x", "mode": LEAK_CANARY}).text,
            c.get("/w/alpha/graph/entity", params={"name": LEAK_CANARY}).text,
            c.get("/ready").text,
        ]
    with client(server, keys.admin[:-1] + "x") as c:
        bodies.append(c.get("/w/alpha/documents").text)
    log = server.log_text()
    assert "GET /w/alpha/documents" in log, "the access log is on"
    for token in (LEAK_CANARY, keys.admin, keys.writer, keys.reader, keys.other):
        assert token not in log
        for body in bodies[1:]:
            assert token not in body
    assert LEAK_CANARY not in bodies[0]


def test_keys_cli_create_list_revoke(tmp_path):
    env = {"RAGKIT_WORKING_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "ragkit", "keys", *a], env=env, capture_output=True, text=True, timeout=60)
    made = run("create", "--workspace", "alpha", "--user", "ann", "--group", "hr", "--scope", "write")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("rk_") and len(token) > 40
    stored = (tmp_path / "server_keys.sqlite").read_bytes()
    assert token.encode() not in stored, "stored hashed"
    listed = run("list")
    assert "ann" in listed.stdout and "write" in listed.stdout and token not in listed.stdout
    key_id = listed.stdout.split()[0]
    assert run("revoke", key_id).returncode == 0
    assert "revoked" in run("list").stdout
    bad = run("create", "--workspace", "../x", "--user", "ann")
    assert bad.returncode == 2 and "1-64 lowercase letters" in bad.stderr


def test_serve_without_the_extra_says_what_to_install(tmp_path):
    # sys.modules[name] = None is how Python itself marks a module as absent.
    code = "import sys; sys.modules['fastapi'] = None; from ragkit.cli.main import main; sys.exit(main(['serve']))"
    done = subprocess.run([sys.executable, "-c", code], env={"RAGKIT_WORKING_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "pip install 'ragkit[server]'" in done.stderr and "fastapi" in done.stderr
