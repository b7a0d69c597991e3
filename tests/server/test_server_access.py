"""Issue 16 item 6 over HTTP: each request is answered as its key's principal.

T1 is readable by everyone; T2 (uploaded with ``access_groups=secret``) holds
canaries: an entity only it mentions (Zorblax Quintaria, in Vexholm) and a
mention of an entity T1 has too (Ada Lovelace). A key outside group
``secret`` must see none of T2 anywhere; a key inside it sees it all.
"""

from __future__ import annotations

import pytest

from server_support import client, wait_job
from ragkit.server.keys import KeyStore

W = "/w/alpha"
T1 = "Ada Lovelace lived in London. Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage."
T2 = "Zorblax Quintaria guards the vault of Vexholm. Ada Lovelace met Zorblax Quintaria in Vexholm."
CANARIES = ("zorblax", "vexholm", "quintaria")


@pytest.fixture(scope="module")
def corpus(served):
    server, keys = served
    store = KeyStore(server.working_dir / "server_keys.sqlite")
    # A writer may only write what it may read: the secret file comes from inside the group.
    insider = store.create(["alpha"], "sam", ["secret"], "write")[1]
    with client(server, keys.writer) as c:
        public = wait_job(c, c.post(f"{W}/documents/texts", json={"texts": [T1], "file_paths": ["t1.txt"]}).json()["url"])
    with client(server, insider) as c:
        r = c.post(f"{W}/documents/upload", files=[("files", ("t2.txt", T2.encode(), "text/plain"))], data={"access_groups": ["secret"]})
        assert r.status_code == 202, r.text
        secret = wait_job(c, r.json()["url"])
    assert public["state"] == secret["state"] == "done"
    return keys.reader, insider, public["processed"][0], secret["processed"][0]


def _no_canary(text: str) -> None:
    lowered = text.lower()
    assert not any(c in lowered for c in CANARIES), text[:500]


@pytest.mark.parametrize("mode", ["naive", "local", "global", "hybrid", "mix", "ppr"])
def test_query_as_outsider_sees_no_canary(served, corpus, mode):
    server, _ = served
    outsider, insider, t1, t2 = corpus
    question = {"question": "Whom did Ada Lovelace meet, and who guards the vault?", "mode": mode}
    with client(server, outsider) as c:
        for route in ("/query", "/query/context", "/query/prompt"):
            r = c.post(W + route, json=question)
            assert r.status_code == 200, r.text
            _no_canary(r.text)
            assert t2 not in r.text
        narrowed = c.post(f"{W}/query/context", json={**question, "doc_ids": [t2]})
        _no_canary(narrowed.text)  # a request may narrow its scope, never widen it
    with client(server, insider) as c:
        assert "zorblax" in c.post(f"{W}/query/context", json=question).text.lower(), "the insider sees T2"


def test_documents_graph_and_export_as_outsider(served, corpus):
    server, _ = served
    outsider, insider, t1, t2 = corpus
    with client(server, outsider) as c:
        listed = c.get(f"{W}/documents").json()
        assert t1 in {d["id"] for d in listed["documents"]} and t2 not in listed["documents"].__repr__()
        assert c.get(f"{W}/documents/{t2}").status_code == 404
        assert c.get(f"{W}/graph/entities", params={"q": "zorblax"}).json() == []
        assert c.get(f"{W}/graph/entity", params={"name": "Zorblax Quintaria"}).status_code == 404
        ada_out = c.get(f"{W}/graph/entity", params={"name": "Ada Lovelace"}).json()
        _no_canary(str(ada_out))
        assert [s["doc_id"] for s in ada_out["sources"]] == [t1]
        sub = c.get(f"{W}/graph/subgraph", params={"name": "Ada Lovelace", "depth": 2})
        _no_canary(sub.text)
        exported = c.get(f"{W}/graph/export")
        assert exported.status_code == 200
        _no_canary(exported.text)
    with client(server, insider) as c:
        ada_in = c.get(f"{W}/graph/entity", params={"name": "Ada Lovelace"}).json()
        assert ada_in["degree"] > ada_out["degree"], "the outsider's degree does not count T2's relations"
        assert {s["doc_id"] for s in ada_in["sources"]} == {t1, t2}
        assert "zorblax" in c.get(f"{W}/graph/export").text.lower()


def test_bad_access_list_is_a_422_naming_the_field(served):
    server, keys = served
    with client(server, keys.writer) as c:
        r = c.post(f"{W}/documents/texts", json={"texts": ["x y z"], "access": {"users": [" padded "]}})
        assert r.status_code == 422 and "access" in r.json()["error"] and "whitespace" in r.json()["error"]
        r = c.post(f"{W}/documents/upload", files=[("files", ("a.txt", b"hello", "text/plain"))], data={"access_users": ["a\x00b"]})
        assert r.status_code == 422 and "access_users" in r.json()["error"]
