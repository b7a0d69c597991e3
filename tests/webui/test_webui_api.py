"""The routes the web UI added (``ragkit.server.routes_webui``) and its
static shell, over HTTP against the live server: who a key is, passages by
chunk id and access lists, each under the rules of every read route."""

from __future__ import annotations

import httpx

from server_support import wait_job
from webui_support import CANARY, HIDDEN_TEXT


def _client(server, key: str | None) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=60)


def _insert(c: httpx.Client, text: str, name: str, listed: dict | None) -> None:
    r = c.post("/w/alpha/documents/texts", json={"texts": [text], "file_paths": [name], "access": listed})
    assert r.status_code == 202, r.text
    job = wait_job(c, r.json()["url"])
    assert job["state"] == "done", job


def test_the_shell_needs_no_key_and_its_data_does(served):
    server, _ = served
    with _client(server, None) as c:
        page = c.get("/")
        assert page.status_code == 200 and "<title>ragkit</title>" in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        script = c.get("/assets/index.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        assert c.get("/assets/not-built.js").status_code == 401  # only the built files are public
        for path in ("/session", "/w/alpha/chunks?id=x", "/w/alpha/documents-access?id=x"):
            assert c.get(path).status_code == 401, path


def test_session_lists_the_key_s_workspaces_and_the_modes(served):
    server, keys = served
    with _client(server, keys.writer) as c:
        me = c.get("/session").json()
    assert (me["user"], me["groups"], me["scope"], me["workspaces"]) == ("wendy", ["team"], "write", ["alpha"])
    modes = {m["name"]: m["description"] for m in me["modes"]}
    assert {"naive", "local", "global", "hybrid", "mix", "ppr", "bypass"} <= set(modes) and all(modes.values())
    with _client(server, keys.admin) as c:
        assert "alpha" in c.get("/session").json()["workspaces"]  # "*": the workspaces that exist


def test_chunks_and_access_lists_hide_what_the_principal_may_not_read(served):
    server, keys = served
    with _client(server, keys.admin) as admin:
        _insert(admin, HIDDEN_TEXT, "hidden.txt", {"users": ["root"]})
        _insert(admin, "Mira Okafor runs the Lisbon depot of Acme Corporation.", "depot.txt", None)
        docs = {d["path"]: d for d in admin.get("/w/alpha/documents").json()["documents"]}
        hidden_id, open_id = docs["hidden.txt"]["id"], docs["depot.txt"]["id"]
        hidden_chunks = [c for s in admin.get("/w/alpha/graph/entity", params={"name": CANARY}).json()["sources"] for c in s["chunk_ids"]]
        open_chunks = [c for s in admin.get("/w/alpha/graph/entity", params={"name": "Mira Okafor"}).json()["sources"] for c in s["chunk_ids"]]
        assert hidden_chunks and open_chunks
        seen = admin.get("/w/alpha/chunks", params={"id": hidden_chunks}).json()
        assert CANARY in seen["chunks"][0]["content"] and seen["missing"] == []
        acl = admin.get("/w/alpha/documents-access", params={"id": [hidden_id, open_id]}).json()["access"]
        assert acl == {hidden_id: {"users": ["root"], "groups": []}, open_id: None}
    with _client(server, keys.restricted) as rita:
        got = rita.get("/w/alpha/chunks", params={"id": [*hidden_chunks, *open_chunks, "no-such-chunk"]}).json()
        assert CANARY not in str(got)
        assert [c["id"] for c in got["chunks"]] == open_chunks
        assert got["missing"] == [*hidden_chunks, "no-such-chunk"]  # hidden and absent alike
        assert rita.get("/w/alpha/documents-access", params={"id": [open_id]}).status_code == 403  # admins only
    with _client(server, keys.writer) as wendy:
        assert wendy.get("/w/alpha/documents-access", params={"id": [open_id]}).status_code == 403
