"""Over HTTP, a key's rankings are those of a server holding only what the
key's principal may read: the same items in the same order.

Two real servers (the offline LLM, the feature-hashing embedder, whose scores
tie often): one holds every document of ``ragkit.testing.access_corpus``,
uploaded with its access list; the other holds, per principal, a workspace of
only the documents that principal may read (with their lists, so that their
identities agree; the principal reads all of them, on the unscoped path),
inserted in another order (so no tie may fall by insertion order). Every mode's context (``/query/context``,
``top_k`` 1 and 2) and, at ``top_k`` 1, the prompt and the answer must agree.

Troubleshooting: the failure lists each differing request and the first field
that differs (``access_corpus.ranking`` names them); ``tests/access/
test_rankings_reference.py`` asks the same through the Python API, faster to
debug.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server_support import Server, client, wait_job
from ragkit.schema import Document
from ragkit.server.keys import KeyStore
from ragkit.testing.access_corpus import DOCS, MODES, PRINCIPALS, QUESTIONS, ranking, readable, scores

FULL = "/w/full"
ROUTES = {"/query/context": (1, 2), "/query/prompt": (1,), "/query": (1,)}
"""Each route and the ``top_k`` values it is asked with."""


def _insert(c: httpx.Client, workspace: str, doc: Document) -> None:
    access = doc.access.model_dump() if doc.access is not None else None
    body = {"texts": [doc.content], "file_paths": [doc.file_path], "access": access}
    job = wait_job(c, c.post(f"{workspace}/documents/texts", json=body).json()["url"])
    assert job["state"] == "done" and len(job["processed"]) == 1, job


def _started(folder: Path, *keys: tuple) -> tuple[Server, list[str]]:
    """A server started with keys made first (it refuses to start without)."""
    folder.mkdir()
    store = KeyStore(folder / "server_keys.sqlite")
    tokens = [store.create(*key)[1] for key in keys]
    return Server(folder).start(), tokens


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[tuple[Server, dict[str, str], Server, dict[str, str]]]:
    """(the full server, a read key per principal, the readable-only server,
    a read key per principal there)."""
    base = tmp_path_factory.mktemp("rankings")
    # The writer may read every document it writes (the write rule): uma, in both groups.
    writer = (["*"], "uma", ["finance", "legal"], "write")
    readers = [(["*"], p.user, sorted(p.groups), "read") for p in PRINCIPALS.values()]
    full, full_tokens = _started(base / "full", writer, *readers)
    reference, ref_tokens = _started(base / "reference", writer, *readers)
    try:
        with client(full, full_tokens[0]) as c:
            for doc in DOCS:
                _insert(c, FULL, doc)
        # Each principal's readable documents alone, with their own lists (a
        # document's identity is its content and its list, so ids agree), in
        # another order; the principal reads all of them: the unscoped path.
        with client(reference, ref_tokens[0]) as c:
            for name, principal in PRINCIPALS.items():
                for doc in listed(principal):
                    _insert(c, f"/w/ref-{name}", doc)
        yield full, dict(zip(PRINCIPALS, full_tokens[1:])), reference, dict(zip(PRINCIPALS, ref_tokens[1:]))
    finally:
        full.stop()
        reference.stop()


def listed(principal) -> list[Document]:
    """``readable``'s documents and order, each with its access list."""
    by_content = {d.content: d for d in DOCS}
    return [by_content[d.content] for d in readable(principal)]


@pytest.mark.parametrize("name", sorted(PRINCIPALS))
def test_every_route_and_mode_ranks_as_the_readable_only_server(servers, name):
    full, keys, reference, ref_keys = servers
    differences, asked = [], 0
    with client(full, keys[name]) as got_c, client(reference, ref_keys[name]) as want_c:
        for route, top_ks in ROUTES.items():
            for question in QUESTIONS:
                for mode in MODES:
                    for top_k in top_ks:
                        body = {"question": question, "mode": mode, "top_k": top_k}
                        got = _ok(got_c.post(FULL + route, json=body))
                        want = _ok(want_c.post(f"/w/ref-{name}{route}", json=body))
                        asked += 1
                        field = _first_difference(got, want)
                        if field is not None:
                            differences.append(f"{route} {mode} top_k={top_k} {question!r}: {field}: "
                                               f"{_short(got, field)} != {_short(want, field)}")
    assert asked == len(QUESTIONS) * len(MODES) * sum(len(k) for k in ROUTES.values())
    assert not differences, f"{len(differences)} of {asked} requests differ:\n" + "\n".join(differences)


def _ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def _first_difference(got: dict, want: dict) -> str | None:
    mine, theirs = {**ranking(got), "prompt": got.get("prompt")}, {**ranking(want), "prompt": want.get("prompt")}
    field = next((f for f in mine if mine[f] != theirs[f]), None)
    if field is None and scores(got) != pytest.approx(scores(want), abs=1e-5):
        return "scores"
    return field


def _short(result: dict, field: str) -> object:
    value = scores(result) if field == "scores" else {**ranking(result), "prompt": result.get("prompt")}[field]
    return value[:300] if isinstance(value, str) else value[:6] if isinstance(value, list) else value
