"""Issue 25, items 1-4, on a live server: the write rule. A principal may only
change, and only be told about, what it may read; a hidden element or
document answers exactly like an absent one (status and body, the name aside).

Each test seeds its own workspace as the issue did: a public file, a
``finance``-only file and a ``legal``-only file, written by keys inside those
groups. ``mallory`` holds a write key and no groups.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from ragkit.server.keys import KeyStore
from server_support import Server, client, wait_job

PUBLIC = "Project Cape is a harbour project in Suzhou. Yingchuan Electronics supplies Project Cape with pumps."
FINANCE = (
    "Project Cape lost four million yuan in the flood quarter, code FIN-CANARY-5521. Orchid Capital funds "
    "Project Cape. Yingchuan Electronics billed Project Cape twice, code FIN-CANARY-5521."
)
LEGAL = (
    "Project Cape faces a lawsuit from Heron Legal, code LEGAL-CANARY-7734. "
    "Heron Legal represents Yingchuan Electronics."
)
CANARIES = ("FIN-CANARY", "LEGAL-CANARY", "Orchid", "orchid", "Heron", "heron", "finance.md", "legal.md")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    working_dir = tmp_path_factory.mktemp("write-acl") / "data"
    working_dir.mkdir()
    store = KeyStore(working_dir / "server_keys.sqlite")
    keys = {
        name: store.create(["*"], user, groups, scope)[1]
        for name, user, groups, scope in (
            ("mallory", "mallory", [], "write"), ("fiona", "fiona", ["finance"], "write"),
            ("lena", "lena", ["legal"], "write"), ("root", "root", [], "admin"), ("rita", "rita", [], "read"),
        )
    }
    with Server(working_dir).start() as srv:
        yield srv, keys


def _c(server, name: str) -> httpx.Client:
    srv, keys = server
    return client(srv, keys[name])


def seed(server) -> tuple[str, dict[str, str]]:
    """A fresh workspace with the three files; returns its prefix and doc ids."""
    ws = f"/w/acl{uuid.uuid4().hex[:8]}"
    ids = {}
    for key, name, text, groups in (
        ("mallory", "public.md", PUBLIC, []), ("fiona", "finance.md", FINANCE, ["finance"]),
        ("lena", "legal.md", LEGAL, ["legal"]),
    ):
        with _c(server, key) as c:
            r = c.post(f"{ws}/documents/upload", files=[("files", (name, text.encode(), "text/markdown"))],
                       data={"access_groups": groups})
            assert r.status_code == 202, r.text
            job = wait_job(c, r.json()["url"])
            assert job["state"] == "done" and len(job["processed"]) == 1, job
            ids[name] = job["processed"][0]
    return ws, ids


def clean(text: str, where: str) -> None:
    for canary in CANARIES:
        assert canary not in text, f"{canary!r} reached {where}: {text[:1500]}"


def same_answer(hidden: httpx.Response, absent: httpx.Response, hidden_name: str, absent_name: str) -> None:
    """Status and body alike, the name the caller gave aside."""
    def masked(r, name):
        return r.text.replace(name, "NAME").replace(name.lower(), "NAME")

    assert hidden.status_code == absent.status_code == 404, (hidden.text, absent.text)
    assert masked(hidden, hidden_name) == masked(absent, absent_name)


def test_edits_and_merges_answer_with_readable_data_only(server):
    ws, _ = seed(server)
    with _c(server, "mallory") as c:
        for r in (
            c.patch(f"{ws}/graph/entity", json={"name": "Project Cape", "type": "organization"}),
            c.patch(f"{ws}/graph/relation", json={"source": "Project Cape", "target": "Yingchuan Electronics",
                                                  "description": "Pumps, as mallory says."}),
            c.post(f"{ws}/graph/merge", json={"sources": ["Suzhou"], "target": "Project Cape"}),
        ):
            assert r.status_code == 200, r.text
            clean(r.text, f"{r.request.method} {r.request.url.path}")
    with _c(server, "fiona") as c:  # the finance facts are still there for finance
        cape = c.get(f"{ws}/graph/entity", params={"name": "Project Cape"}).json()
        assert "FIN-CANARY-5521" in cape["properties"]["description"]
    with _c(server, "lena") as c:
        assert "LEGAL-CANARY-7734" in c.get(f"{ws}/graph/entity", params={"name": "Project Cape"}).text


def test_creating_an_entity_only_a_hidden_document_names_is_no_oracle(server):
    ws, _ = seed(server)
    with _c(server, "mallory") as c:
        hidden = c.post(f"{ws}/graph/entities", json={"name": "Orchid Capital", "description": "A name."})
        absent = c.post(f"{ws}/graph/entities", json={"name": "Plover Fund", "description": "A name."})
    assert hidden.status_code == absent.status_code == 200, (hidden.text, absent.text)
    clean(hidden.text.replace("Orchid Capital", "NAME").replace("orchid capital", "NAME"), "a create's answer")
    assert hidden.json()["description"] == absent.json()["description"] == "A name."
    with _c(server, "fiona") as c:
        assert "Orchid Capital funds" in c.get(f"{ws}/graph/entity", params={"name": "Orchid Capital"}).text


@pytest.mark.parametrize("route", ["patch-entity", "rename", "delete-entity", "merge-source", "merge-target",
                                   "create-relation", "patch-relation", "delete-relation"])
def test_every_graph_write_answers_a_hidden_element_like_an_absent_one(server, route):
    ws, _ = seed(server)

    def call(c: httpx.Client, name: str) -> httpx.Response:
        return {
            "patch-entity": lambda: c.patch(f"{ws}/graph/entity", json={"name": name, "description": "x"}),
            "rename": lambda: c.patch(f"{ws}/graph/entity", json={"name": name, "new_name": "Renamed"}),
            "delete-entity": lambda: c.delete(f"{ws}/graph/entity", params={"name": name}),
            "merge-source": lambda: c.post(f"{ws}/graph/merge", json={"sources": [name], "target": "Suzhou"}),
            "merge-target": lambda: c.post(f"{ws}/graph/merge", json={"sources": ["Suzhou"], "target": name}),
            "create-relation": lambda: c.post(f"{ws}/graph/relations", json={"source": name, "target": "Suzhou"}),
            "patch-relation": lambda: c.patch(f"{ws}/graph/relation",
                                              json={"source": name, "target": "Project Cape", "description": "x"}),
            "delete-relation": lambda: c.delete(f"{ws}/graph/relation", params={"source": name, "target": "Project Cape"}),
        }[route]()

    with _c(server, "mallory") as c:
        same_answer(call(c, "Orchid Capital"), call(c, "Plover Fund"), "Orchid Capital", "Plover Fund")
    with _c(server, "fiona") as c:  # one who may read it: the same write works, and it is hers to see
        r = call(c, "Orchid Capital")
        assert r.status_code == 200, r.text
        clean(r.text.replace("Orchid", "").replace("orchid", ""), "fiona's write, for legal's canary")


def test_resubmitting_a_hidden_documents_text_does_not_take_it_over(server):
    ws, ids = seed(server)
    with _c(server, "mallory") as c:
        r = c.post(f"{ws}/documents/texts", json={"texts": [FINANCE], "access": {"users": ["mallory"]}})
        assert r.status_code == 202, r.text
        job = wait_job(c, r.json()["url"])
        listed = c.get(f"{ws}/documents").json()
    assert job["state"] == "done" and not job["skipped"], job
    assert ids["finance.md"] not in str(job) and ids["finance.md"] not in str(listed)
    assert job["processed"] and job["processed"][0] != ids["finance.md"]
    with _c(server, "fiona") as c:  # finance keeps its document and its list
        assert c.get(f"{ws}/documents/{ids['finance.md']}").status_code == 200
    with _c(server, "rita") as c:
        assert c.get(f"{ws}/documents/{ids['finance.md']}").status_code == 404


def test_same_named_uploads_of_two_principals_never_replace_each_other(server):
    ws, _ = seed(server)
    with _c(server, "fiona") as c:
        r = c.post(f"{ws}/documents/upload", files=[("files", ("report.md", b"Finance report of Orchid Capital.", "text/markdown"))],
                   data={"access_groups": ["finance"]})
        finance_report = wait_job(c, r.json()["url"])["processed"][0]
    with _c(server, "mallory") as c:
        r = c.post(f"{ws}/documents/upload", files=[("files", ("report.md", b"Mallory writes about Suzhou.", "text/markdown"))])
        mallory_report = wait_job(c, r.json()["url"])["processed"][0]
    with _c(server, "fiona") as c:
        assert c.get(f"{ws}/documents/{finance_report}").status_code == 200, "replaced by another user's upload"
    with _c(server, "rita") as c:  # mallory's text did not inherit the finance list
        assert c.get(f"{ws}/documents/{mallory_report}").status_code == 200
        assert c.get(f"{ws}/documents/{finance_report}").status_code == 404


def test_deletes_of_hidden_documents_answer_like_absent_ones_and_delete_nothing(server):
    ws, ids = seed(server)
    with _c(server, "mallory") as c:
        same_answer(c.post(f"{ws}/documents/delete", json={"ids": ["legal.md"]}),
                    c.post(f"{ws}/documents/delete", json={"ids": ["lawyers.md"]}), "legal.md", "lawyers.md")
        same_answer(c.delete(f"{ws}/documents/{ids['legal.md']}"),
                    c.delete(f"{ws}/documents/doc-{'0' * 32}"), ids["legal.md"], f"doc-{'0' * 32}")
        assert c.post(f"{ws}/documents/delete", json={"ids": ["public.md", "legal.md"]}).status_code == 404
        assert c.get(f"{ws}/documents/{ids['public.md']}").status_code == 200, "all or nothing"
    with _c(server, "lena") as c:
        assert c.get(f"{ws}/documents/{ids['legal.md']}").status_code == 200
        assert c.post(f"{ws}/documents/delete", json={"ids": ["legal.md"]}).json() == {"deleted": [ids["legal.md"]]}


def test_an_access_list_that_hides_the_upload_from_its_writer_is_refused(server):
    ws, _ = seed(server)
    with _c(server, "mallory") as c:
        r = c.post(f"{ws}/documents/texts", json={"texts": ["Mallory's note."], "access": {"groups": ["finance"]}})
        up = c.post(f"{ws}/documents/upload", files=[("files", ("n.md", b"x y", "text/markdown"))],
                    data={"access_groups": ["finance"]})
    for resp in (r, up):
        assert resp.status_code == 422 and "include your user" in resp.json()["error"], resp.text


def test_an_admin_key_sees_other_keys_jobs_without_names_or_lists(server):
    ws, _ = seed(server)
    with _c(server, "fiona") as c:
        r = c.post(f"{ws}/documents/upload", files=[("files", ("q3-secret-plan.md", b"Plan text.", "text/markdown"))],
                   data={"access_groups": ["finance"]})
        url = r.json()["url"]
        whole = wait_job(c, url)
    with _c(server, "root") as c:
        seen = c.get(url)
    with _c(server, "mallory") as c:
        other = c.get(url)
    assert "q3-secret-plan.md" in str(whole) and whole["access"] == {"users": [], "groups": ["finance"]}
    assert seen.status_code == 200 and seen.json()["state"] == "done"
    assert "q3-secret-plan" not in seen.text and "finance" not in seen.text and whole["processed"][0] not in seen.text
    assert other.status_code == 404
