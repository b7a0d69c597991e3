"""Issue 25, item 8, on a live server: a query's ``metadata.cache_hits`` never
tells one principal that another asked the same question; its own repeated
question still hits the cache."""

from __future__ import annotations

import pytest

from ragkit.server.keys import KeyStore
from server_support import Server, client, wait_job

W = "/w/cache"
TEXT = "Heron Bay hosts the Plover Fund. The Plover Fund finances Heron Bay's harbour."


@pytest.fixture(scope="module")
def served_cache(tmp_path_factory):
    working_dir = tmp_path_factory.mktemp("cache-meta") / "data"
    (working_dir / "cache").mkdir(parents=True)
    store = KeyStore(working_dir / "server_keys.sqlite")
    keys = {user: store.create(["cache"], user, groups, "write")[1]
            for user, groups in (("ann", []), ("ben", []), ("cat", ["team"]))}
    server = Server(working_dir).start()
    with client(server, keys["ann"]) as c:
        assert wait_job(c, c.post(f"{W}/documents/texts", json={"texts": [TEXT]}).json()["url"])["state"] == "done"
    try:
        yield server, keys
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["mix", "bypass"])
def test_another_principals_question_is_no_cache_hit(served_cache, mode):
    server, keys = served_cache
    question = {"question": f"Who finances Heron Bay ({mode})?", "mode": mode}

    def hits(user: str) -> list[str]:
        with client(server, keys[user]) as c:
            r = c.post(f"{W}/query", json=question)
            assert r.status_code == 200, r.text
            return r.json()["metadata"]["cache_hits"]

    assert hits("ann") == []
    assert hits("ben") == [], "ben learns nothing of ann's question (same readable documents)"
    assert hits("cat") == []
    again = hits("ann")
    assert "answer" in again and ("keywords" in again or mode == "bypass"), "the asker's own repeat still hits"
