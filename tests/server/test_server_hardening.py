"""Issue 25, item 11, on a live server: reads create no workspace, names are
lowercase, a file HTTP ingestion cannot read fails the way the CLI says,
names with bidirectional controls are shown escaped, and what ragkit writes
is its owner's alone (0700 folders, 0600 files)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from ragkit.server.keys import KeyStore
from server_support import Server, client, wait_job


@pytest.fixture(scope="module")
def hardened(tmp_path_factory):
    working_dir = tmp_path_factory.mktemp("hardening") / "data"
    # Keys made as an operator makes them: with the command (its umask, its folders).
    env = {**os.environ, "RAGKIT_WORKING_DIR": str(working_dir)}
    env.pop("RAGKIT_CONFIG", None)
    tokens = {}
    for name, args in (("w2", ["--workspace", "w2"]), ("star", ["--workspace", "*"])):
        made = subprocess.run([sys.executable, "-m", "ragkit", "keys", "create", *args, "--user", name, "--scope", "write"],
                              env=env, capture_output=True, text=True, check=True)
        tokens[name] = made.stdout.strip()
    with Server(working_dir).start() as server:
        yield server, tokens


def test_reads_never_create_a_workspace(hardened):
    server, tokens = hardened
    with client(server, tokens["w2"]) as c:
        assert c.get("/ready").status_code == 200
        assert c.get("/w/w2/documents").json()["total"] == 0, "a key made for w2 made w2"
    with client(server, tokens["star"]) as c:
        for route in ("/w/nosuch/documents", "/w/nosuch/graph/entities?q=a", "/w/nosuch/api/tags"):
            r = c.get(route)
            assert r.status_code == 404 and "first write" in r.text, (route, r.text)
        r = c.post("/w/nosuch/query", json={"question": "anything?"})
        assert r.status_code == 404
    assert not (server.working_dir / "default").exists(), "/ready made the default workspace"
    assert not (server.working_dir / "nosuch").exists()


def test_workspace_names_are_lowercase(hardened):
    server, tokens = hardened
    with client(server, tokens["star"]) as c:
        r = c.get("/w/W1/documents")
    assert r.status_code == 400 and "lowercase" in r.json()["error"]
    assert not (server.working_dir / "W1").exists()


def test_an_unreadable_upload_fails_with_the_clis_reason(hardened):
    server, tokens = hardened
    with client(server, tokens["w2"]) as c:
        r = c.post("/w/w2/documents/upload", files=[
            ("files", ("empty.pdf", b"", "application/pdf")),
            ("files", ("corrupt.pdf", b"%PDF-1.7\n this is no pdf at all", "application/pdf")),
        ])
        job = wait_job(c, r.json()["url"])
    assert job["state"] == "failed" and set(job["failed"]) == {"empty.pdf", "corrupt.pdf"}, job
    assert job["failed"]["empty.pdf"] == "empty file" and "not a readable PDF" in job["failed"]["corrupt.pdf"], job["failed"]
    assert "uploads" not in str(job["failed"]), "the server's own paths stay out of it"
    assert job["documents_done"] == job["documents"] == 2


def test_names_with_bidirectional_controls_are_shown_escaped(hardened):
    server, tokens = hardened
    with client(server, tokens["w2"]) as c:
        r = c.post("/w/w2/documents/upload", files=[("files", ("invoice\u202egpj.md", b"A note on Heron Bay.", "text/markdown"))])
        job = wait_job(c, r.json()["url"])
        listed = c.get("/w/w2/documents").text
    assert job["files"] == ["invoice\\u202egpj.md"]
    assert "\u202e" not in listed and "invoice\\\\u202egpj.md" in listed


def test_everything_ragkit_writes_is_its_owners_alone(hardened):
    server, tokens = hardened
    with client(server, tokens["w2"]) as c:
        r = c.post("/w/w2/documents/texts", json={"texts": ["A private note about Plover Fund."], "file_paths": ["p.md"]})
        assert wait_job(c, r.json()["url"])["state"] == "done"
    wide = []
    for root, dirs, files in os.walk(server.working_dir):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                wide.append(f"{oct(os.stat(path).st_mode)} {path}")
    assert not wide, "readable by others:\n" + "\n".join(wide)
    assert stat.S_IMODE(os.stat(server.working_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(server.working_dir / "server_keys.sqlite").st_mode) == 0o600
    assert KeyStore(server.working_dir / "server_keys.sqlite").active_count() == 2
