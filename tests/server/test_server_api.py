"""Every endpoint of the real server, over HTTP (httpx), on workspace "alpha"."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from server_support import client, wait_job

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "examples" / "corpus" / "en").glob("*.md"))
W = "/w/alpha"


@pytest.fixture(scope="module")
def loaded(served):
    """The English corpus uploaded (multipart) and one text inserted; their jobs."""
    server, keys = served
    with client(server, keys.writer) as c:
        files = [("files", (p.name, p.read_bytes(), "text/markdown")) for p in CORPUS[:4]]
        r = c.post(f"{W}/documents/upload", files=files, data={"access_groups": []})
        assert r.status_code == 202, r.text
        assert r.headers["location"] == r.json()["url"]
        upload = wait_job(c, r.json()["url"])
        files = [("files", (p.name, p.read_bytes(), "text/markdown")) for p in CORPUS[4:]]
        second = wait_job(c, c.post(f"{W}/documents/upload", files=files).json()["url"])
        r = c.post(f"{W}/documents/texts", json={"texts": ["Ada Lovelace wrote the first program for the Analytical Engine."],
                                                  "file_paths": ["notes/ada.txt"]})
        assert r.status_code == 202, r.text
        text = wait_job(c, r.json()["url"])
    return upload, second, text


def test_upload_job_reports_progress(served, loaded):
    upload, second, text = loaded
    assert upload["state"] == "done", upload
    assert upload["documents"] == 4 and upload["documents_done"] == 4 and len(upload["processed"]) == 4
    assert upload["chunks"] > 0 and upload["llm_calls"] > 0 and upload["tokens"] > 0
    assert upload["elapsed"] > 0 and upload["files"] == [p.name for p in CORPUS[:4]]
    assert second["state"] == text["state"] == "done" and len(text["processed"]) == 1


def test_job_events_stream_as_ndjson_until_done(served, loaded):
    server, keys = served
    with client(server, keys.reader) as c:
        other = c.get(f"{W}/jobs/{loaded[0]['id']}")
        assert other.status_code == 404, "another key's job is not shown: it names files"
    with client(server, keys.writer) as c:
        url = f"{W}/jobs/{loaded[0]['id']}/events"
        with c.stream("GET", url) as r:
            assert r.headers["content-type"].startswith("application/x-ndjson")
            lines = [json.loads(line) for line in r.iter_lines() if line]
        assert lines[-1]["state"] == "done"
        assert c.get(f"{W}/jobs/nosuchjob").status_code == 404


def test_documents_list_page_filter_get(served, loaded):
    server, keys = served
    with client(server, keys.reader) as c:
        page = c.get(f"{W}/documents", params={"status": "processed"}).json()
        assert page["total"] == len(CORPUS) + 1
        paths = {d["path"] for d in page["documents"]}
        assert {p.name for p in CORPUS} | {"notes/ada.txt"} == paths
        first = c.get(f"{W}/documents", params={"limit": 2}).json()
        assert len(first["documents"]) == 2 and first["next_cursor"]
        rest = c.get(f"{W}/documents", params={"limit": 100, "cursor": first["next_cursor"]}).json()
        assert len(rest["documents"]) == len(CORPUS) + 1 - 2
        assert c.get(f"{W}/documents", params={"status": "failed"}).json()["total"] == 0
        bad = c.get(f"{W}/documents", params={"status": "weird"})
        assert bad.status_code == 400 and "processed" in bad.json()["error"]
        one = page["documents"][0]
        assert c.get(f"{W}/documents/{one['id']}").json()["id"] == one["id"]
        missing = c.get(f"{W}/documents/doc-nosuch")
        assert missing.status_code == 404 and "doc-nosuch" in missing.json()["error"]


@pytest.mark.parametrize("mode", ["naive", "local", "global", "hybrid", "mix", "ppr", "bypass"])
def test_query_every_mode(served, loaded, mode):
    server, keys = served
    with client(server, keys.reader) as c:
        r = c.post(f"{W}/query", json={"question": "Who wrote the first program?", "mode": mode, "top_k": 5})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["answer"]
        if mode != "bypass":
            assert body["references"] and all("doc_id" in ref for ref in body["references"])
            # The references are the sources the answer cites, as it numbers them, so [n] in the text finds its source.
            cited = {int(n) for n in re.findall(r"\[(\d+)\]", body["answer"])}
            assert cited == {ref["number"] for ref in body["references"]} == set(range(1, len(cited) + 1))
            sources = {ref["source_number"]: ref["doc_id"] for ref in body["sources"]}
            assert all(sources[ref["source_number"]] == ref["doc_id"] for ref in body["references"])


def test_query_context_prompt_and_stream(served, loaded):
    server, keys = served
    question = {"question": "Which supplier's delivery slipped?", "mode": "mix"}
    with client(server, keys.reader) as c:
        context = c.post(f"{W}/query/context", json=question).json()
        assert context["context"] and context["answer"] is None
        prompt = c.post(f"{W}/query/prompt", json=question).json()
        assert prompt["prompt"] and prompt["answer"] is None
        full = c.post(f"{W}/query", json=question).json()
        with c.stream("POST", f"{W}/query/stream", json=question) as r:
            lines = [json.loads(line) for line in r.iter_lines() if line]
        deltas = "".join(line["delta"] for line in lines if "delta" in line)
        assert len(lines) > 2 and lines[-1]["done"] is True
        assert deltas == lines[-1]["answer"] == full["answer"]
        assert lines[-1]["references"] == full["references"]


def test_query_errors_name_the_field(served, loaded):
    server, keys = served
    with client(server, keys.reader) as c:
        r = c.post(f"{W}/query", json={"question": "x", "top_k": 0})
        assert r.status_code == 422 and "top_k" in r.json()["error"] and "Fix" in r.json()["error"]
        r = c.post(f"{W}/query", json={"question": "x", "topk": 3})
        assert r.status_code == 422 and "topk" in r.json()["error"]
        r = c.post(f"{W}/query", json={"question": "x", "mode": "nosuchmode"})
        assert r.status_code == 422 and "mode" in r.json()["error"] and "nosuchmode" in r.json()["error"]
        r = c.post(f"{W}/query", json={"mode": "mix"})
        assert r.status_code == 422 and "question" in r.json()["error"]


def test_graph_read_endpoints(served, loaded):
    server, keys = served
    with client(server, keys.reader) as c:
        found = c.get(f"{W}/graph/entities", params={"q": "Ada", "limit": 5})
        assert found.status_code == 200, found.text
        names = found.json()
        name = next(n for n in names if "ada" in n.lower())
        entity = c.get(f"{W}/graph/entity", params={"name": name})
        assert entity.status_code == 200, entity.text
        info = entity.json()
        assert info["key"] == name and info["degree"] >= 1
        assert [s["file_path"] for s in info["sources"]] == ["notes/ada.txt"]
        sub = c.get(f"{W}/graph/subgraph", params={"name": name, "depth": 1, "max_nodes": 3, "max_edges": 2})
        assert sub.status_code == 200, sub.text
        assert len(sub.json()["nodes"]) <= 3 and len(sub.json()["edges"]) <= 2
        edge = sub.json()["edges"][0]
        rel = c.get(f"{W}/graph/relation", params={"source": edge["source"], "target": edge["target"]})
        assert rel.status_code == 200, rel.text
        assert rel.json()["sources"][0]["file_path"] == "notes/ada.txt"
        assert c.get(f"{W}/graph/entity", params={"name": "No Such Entity"}).status_code == 404
        r = c.get(f"{W}/graph/subgraph", params={"name": name, "max_nodes": 0})
        assert r.status_code == 422 and "max_nodes" in r.json()["error"]


def test_graph_edits_and_export(served, loaded):
    server, keys = served
    with client(server, keys.writer) as c:
        assert c.post(f"{W}/graph/entities", json={"name": "Zeta Corp", "type": "organization", "description": "A maker."}).status_code == 200
        assert c.post(f"{W}/graph/entities", json={"name": "Zeta Inc", "description": "A maker too."}).status_code == 200
        assert c.post(f"{W}/graph/entities", json={"name": "Zeta Corp"}).status_code == 409
        r = c.patch(f"{W}/graph/entity", json={"name": "Zeta Inc", "description": "Makes gears."})
        assert r.status_code == 200, r.text
        r = c.post(f"{W}/graph/relations", json={"source": "Zeta Corp", "target": "Zeta Inc", "description": "same firm"})
        assert r.status_code == 200, r.text
        r = c.patch(f"{W}/graph/relation", json={"source": "Zeta Corp", "target": "Zeta Inc", "keywords": "merger"})
        assert r.status_code == 200, r.text
        assert c.delete(f"{W}/graph/relation", params={"source": "Zeta Corp", "target": "Zeta Inc"}).status_code == 200
        r = c.post(f"{W}/graph/merge", json={"sources": ["Zeta Inc"], "target": "Zeta Corp"})
        assert r.status_code == 200, r.text
        r = c.patch(f"{W}/graph/entity", json={"name": "Zeta Corp", "new_name": "Zeta Group"})
        assert r.status_code == 200, r.text
        assert c.delete(f"{W}/graph/entity", params={"name": "Zeta Group"}).status_code == 200
        assert c.delete(f"{W}/graph/entity", params={"name": "Zeta Group"}).status_code == 404
        exported = c.get(f"{W}/graph/export", params={"format": "json"})
        assert exported.status_code == 200 and "Ada" in exported.text and "Zeta" not in exported.text
        graphml = c.get(f"{W}/graph/export", params={"format": "graphml"})
        assert graphml.status_code == 200 and graphml.text.startswith("<?xml")
        bad = c.get(f"{W}/graph/export", params={"format": "csv"})
        assert bad.status_code == 422 and "format" in bad.json()["error"]
    exports = server.working_dir / "alpha" / "server" / "exports"
    deadline = time.monotonic() + 10  # removed by a task that runs once the body is sent
    while list(exports.rglob("*.*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(exports.rglob("*.*")), "export files are removed once sent"


def test_delete_one_and_many(served, loaded):
    server, keys = served
    with client(server, keys.writer) as c:
        r = c.post(f"{W}/documents/texts", json={"texts": ["Temp one about Brontë.", "Temp two about Austen."]})
        ids = wait_job(c, r.json()["url"])["processed"]
        assert len(ids) == 2
        r = c.post(f"{W}/documents/delete", json={"ids": [ids[0], "doc-unknown"]})
        assert r.status_code == 404 and "doc-unknown" in r.json()["error"]
        assert c.get(f"{W}/documents/{ids[0]}").status_code == 200, "all or nothing"
        assert c.delete(f"{W}/documents/{ids[0]}").json() == {"deleted": [ids[0]]}
        assert c.post(f"{W}/documents/delete", json={"ids": [ids[1]]}).json() == {"deleted": [ids[1]]}
        assert c.get(f"{W}/documents/{ids[1]}").status_code == 404


def test_upload_limits_and_types(served):
    server, keys = served
    with client(server, keys.writer) as c:
        r = c.post(f"{W}/documents/upload", files=[("files", ("a.exe", b"MZ", "application/octet-stream"))])
        assert r.status_code == 415 and "'.exe'" in r.json()["error"]
        assert all(t in r.json()["error"] for t in (".md", ".txt", ".pdf", ".docx")), "names the supported types"
        big = b"x" * 300_001
        r = c.post(f"{W}/documents/upload", files=[("files", ("big.txt", big, "text/plain"))])
        assert r.status_code == 413 and "max_upload_bytes" in r.json()["error"] and "300000" in r.json()["error"]
        many = [("files", (f"f{i}.txt", b"hello", "text/plain")) for i in range(6)]
        r = c.post(f"{W}/documents/upload", files=many)
        assert r.status_code == 413 and "max_upload_files" in r.json()["error"] and "5" in r.json()["error"]
    uploads = server.working_dir / "alpha" / "server" / "uploads"
    assert not uploads.exists() or not any(uploads.iterdir()), "nothing refused is kept"


def test_health_ready_metrics_docs(served, loaded):
    server, keys = served
    with client(server, None) as anonymous:
        assert anonymous.get("/health").json() == {"status": "ok"}
        assert anonymous.get("/openapi.json").json()["info"]["title"] == "ragkit"
        assert "swagger" in anonymous.get("/docs").text.lower()
    with client(server, keys.reader) as c:
        ready = c.get("/ready").json()
        assert ready["ready"] is True and set(ready["stores"]) >= {"graph", "doc_status", "chunk_vectors", "full_docs"}
        assert ready["models"] == {"embedder": "ok", "llm": "ok"}, "each configured model answered one call"
        assert c.get("/metrics").status_code == 403, "metrics need admin scope"
    with client(server, keys.admin) as c:
        text = c.get("/metrics").text
    assert 'ragkit_http_requests_total{method="POST",route="/w/{workspace}/query",status="200"}' in text
    assert 'ragkit_http_request_seconds_bucket{le="0.005",method="POST",route="/w/{workspace}/query"}' in text
    assert 'ragkit_llm_calls_total{role="extraction"}' in text
    assert 'ragkit_llm_tokens_total{direction="input",role="extraction"}' in text
    assert "ragkit_ingestion_queue_depth" in text


def test_uploaded_pdf_and_docx_are_cited_by_page(served):
    """Office and PDF uploads go through the loaders: the answer's reference
    names the page its passage came from (workspace "other", so the other
    tests' counts on "alpha" stay as they are)."""
    server, keys = served
    en = ROOT / "examples" / "corpus" / "en"
    files = [("files", (p.name, p.read_bytes(), "application/octet-stream"))
             for p in (en / "yingchuan-incident-report.pdf", en / "haijia-procurement-memo.docx")]
    with client(server, keys.other) as c:
        r = c.post("/w/other/documents/upload", files=files)
        assert r.status_code == 202, r.text
        job = wait_job(c, r.json()["url"])
        assert job["state"] == "done" and len(job["processed"]) == 2, job
        r = c.post("/w/other/query/context", json={"question": "Yingchuan incident report", "mode": "naive"})
        assert r.status_code == 200, r.text
        cites = [ref.get("citation") or "" for ref in r.json()["sources"]]
        assert any(c.startswith("yingchuan-incident-report.pdf p. ") for c in cites), cites
