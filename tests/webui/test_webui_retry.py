"""Retry of failed documents (``POST /w/{ws}/documents/retry``): a document
whose extraction failed is indexed again from its stored text once the model
works, with its access list; hidden, unknown or not failed documents are refused."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from server_support import Server, wait_job
from webui_support import make_keys, open_page, sign_in

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def flaky(tmp_path_factory):
    working_dir = tmp_path_factory.mktemp("webui-retry") / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    flag = working_dir.parent / "fail.flag"
    flag.write_text("fail")
    env = {"RAGKIT_LLM": "flaky_llm:FlakyOfflineLLM", "RAGKIT_LLM__DELAY": None, "RAGKIT_LLM__API_KEY": None,
           "RAGKIT_TEST_FAIL_FLAG": str(flag),
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent / "server"), os.environ.get("PYTHONPATH", "")])}
    with Server(working_dir).start(extra_env=env) as server:
        yield server, keys, flag


def test_a_failed_document_is_retried(flaky, browser):
    server, keys, flag = flaky
    auth = lambda k: {"Authorization": f"Bearer {k}"}  # noqa: E731
    with httpx.Client(base_url=server.url, headers=auth(keys.writer), timeout=120) as c:
        r = c.post("/w/alpha/documents/texts", json={"texts": ["FAILME Nadia Brook founded Kestrel Labs in Oslo."],
                                                     "file_paths": ["kestrel.txt"], "access": {"groups": ["team", "ops"]}})
        wait_job(c, r.json()["url"])
        (doc,) = c.get("/w/alpha/documents").json()["documents"]
        assert doc["status"] == "failed" and doc["error"], doc
        with httpx.Client(base_url=server.url, headers=auth(keys.restricted), timeout=60) as rita:
            assert rita.post("/w/alpha/documents/retry", json={"ids": [doc["id"]]}).status_code == 403  # read scope
        assert c.post("/w/alpha/documents/retry", json={"ids": ["no-such-doc"]}).status_code == 404
        flag.unlink()
        # In the browser: the failed row shows its error and a Retry button, which indexes it again.
        w = open_page(browser, server.url)
        sign_in(w.page, keys.writer)
        row = w.page.locator("tr", has_text="kestrel.txt")
        assert "failed" in row.inner_text() and doc["error"][:20] in row.inner_text()
        w.page.get_by_role("button", name="Retry kestrel.txt").click()
        w.page.wait_for_function("() => document.querySelector('tr[data-doc] .s-processed') !== null", timeout=120_000)
        w.assert_clean()
        (after,) = c.get("/w/alpha/documents").json()["documents"]
        assert (after["status"], after["error"]) == ("processed", None)
        assert "Kestrel Labs" in c.post("/w/alpha/query", json={"question": "Who founded Kestrel Labs?"}).text
        assert c.post("/w/alpha/documents/retry", json={"ids": [doc["id"]]}).status_code == 409  # no longer failed
    with httpx.Client(base_url=server.url, headers=auth(keys.admin), timeout=60) as c:
        acl = c.get("/w/alpha/documents-access", params={"id": [doc["id"]]}).json()["access"]
        assert acl == {doc["id"]: {"users": [], "groups": ["ops", "team"]}}  # the access list survived the retry
