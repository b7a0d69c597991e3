"""``ragkit documents`` and ``ragkit delete DOC_ID_OR_PATH`` as a user runs them,
on a workspace with processed documents, one that failed (with its error), and
one indexed by its absolute path."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.errors import ModelError
from ragkit.pipeline.load import load_documents
from ragkit.protocols import ChatRequest, Completion
from ragkit.rag import RAG
from ragkit.settings import Settings
from ragkit.testing.corpus import write_passages
from ragkit.testing.replay import ReplayLLM

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"
PASSAGES = 8
FAILING = 3
"""the passage whose extraction fails (a rate limit that outlasted the retries)"""


def ragkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    env["RAGKIT_LLM"] = "replay"
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def ok(*args: str, cwd: Path) -> str:
    out = ragkit(*args, cwd=cwd)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


RATE_LIMITED = "429 Too Many Requests: retries exhausted"


class RateLimitedLLM(ReplayLLM):
    """The replay model, except that prompts containing ``trigger`` fail."""

    def __init__(self, trigger: str) -> None:
        super().__init__()
        self.trigger = trigger

    async def complete(self, request: ChatRequest) -> Completion:
        if self.trigger in request.prompt:
            raise ModelError(RATE_LIMITED, public=RATE_LIMITED)  # as an adapter does: a public cause
        return await super().complete(request)


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> dict[str, str]:
    """``corpus/passage-N.txt`` indexed by relative paths from ``tmp_path`` (as
    ``ragkit index corpus`` there would), ``extra/notes.txt`` by its absolute
    path; the workspace is the CLI's default one. Returns path -> doc id."""
    files = write_passages(tmp_path / "corpus", limit=PASSAGES)
    trigger = files[FAILING].read_text().split("\n", 1)[0]
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "notes.txt").write_text("Ada Lovelace wrote the first program for the Analytical Engine.")
    monkeypatch.chdir(tmp_path)
    loaded = load_documents([Path("corpus"), tmp_path / "extra" / "notes.txt"])

    async def index() -> None:
        async with RAG(Settings(working_dir=tmp_path / "ragkit_data"), llm=RateLimitedLLM(trigger)) as rag:
            report = await rag.indexer().insert(loaded.documents)
            assert len(report.failed) == 1 and len(report.processed) == PASSAGES

    asyncio.run(index())
    return {d.file_path: d.id for d in loaded.documents}


def listing(cwd: Path, *args: str) -> dict:
    return json.loads(ok("documents", "--json", *args, cwd=cwd))


def test_documents_pages_through_everything_with_paths_statuses_and_errors(tmp_path, workspace):
    failed_path = f"corpus/passage-{FAILING}.txt"
    seen, cursor, sizes = [], None, []
    while True:
        page = listing(tmp_path, "--limit", "3", *(["--cursor", cursor] if cursor else []))
        assert set(page) == {"documents", "next_cursor", "total"} and page["total"] == PASSAGES + 1
        sizes.append(len(page["documents"]))
        seen += page["documents"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sizes == [3, 3, 3]
    assert [d["id"] for d in seen] == sorted(workspace.values())
    by_path = {d["path"]: d for d in seen}
    assert {p: d["id"] for p, d in by_path.items()} == workspace  # relative and absolute paths as indexed
    row = by_path["corpus/passage-0.txt"]
    assert set(row) == {"id", "path", "status", "chunks", "error", "updated", "created"}
    assert row["status"] == "processed" and row["chunks"] >= 1 and row["error"] is None
    assert by_path[failed_path]["status"] == "failed" and "429 Too Many Requests" in by_path[failed_path]["error"]

    failed = listing(tmp_path, "--status", "failed")
    assert [d["path"] for d in failed["documents"]] == [failed_path]
    assert failed["total"] == 1 and failed["next_cursor"] is None

    table = ok("documents", "--status", "failed", cwd=tmp_path).splitlines()
    assert table[0].split() == ["id", "status", "chunks", "updated", "(UTC)", "path", "error"]
    assert workspace[failed_path] in table[2] and "429 Too Many Requests: retries exhausted" in table[2]
    assert table[-1] == "1 of 1 failed document(s)"

    table = ok("documents", "--limit", "4", cwd=tmp_path).splitlines()
    assert table[-2] == f"4 of {PASSAGES + 1} document(s)"
    assert table[-1] == f"next page: ragkit documents --limit 4 --cursor {sorted(workspace.values())[3]}"

    status = ok("status", cwd=tmp_path)
    assert "1 document(s) failed: see why with `ragkit documents --status failed`" in status

    bad = ragkit("documents", "--limit", "0", cwd=tmp_path)
    assert bad.returncode == 2 and "page size must be 1 to 1000, got 0" in bad.stderr


def test_delete_by_relative_and_absolute_paths_and_ids(tmp_path, workspace):
    ids = workspace
    out = ok("delete", "corpus/passage-0.txt", cwd=tmp_path)
    assert f"deleted {ids['corpus/passage-0.txt']} (corpus/passage-0.txt)" in out
    ok("delete", str(tmp_path / "corpus" / "passage-1.txt"), cwd=tmp_path)  # indexed relative, named absolute
    ok("delete", "extra/notes.txt", cwd=tmp_path)  # indexed absolute, named relative
    # other spellings, an id, and the failed document (committed nowhere: found by its status record)
    ok("delete", "./corpus//passage-2.txt", ids["corpus/passage-4.txt"], f"corpus/../corpus/passage-{FAILING}.txt",
       cwd=tmp_path)

    left = listing(tmp_path)
    assert sorted(d["path"] for d in left["documents"]) == [f"corpus/passage-{i}.txt" for i in (5, 6, 7)]
    check = ragkit("check", cwd=tmp_path)
    assert check.returncode == 0 and "no problems found" in check.stdout, check.stdout + check.stderr


def test_an_unknown_id_or_path_is_an_error_and_deletes_nothing(tmp_path, workspace):
    before = listing(tmp_path)
    out = ragkit("delete", "corpus/passage-0.txt", "corpus/pasage-1.txt", "doc-0000", cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no document has the id, or was indexed from the path, 'corpus/pasage-1.txt', 'doc-0000'" in out.stderr
    assert "nothing was deleted" in out.stderr and "`ragkit documents` lists both" in out.stderr
    assert out.stdout == ""
    assert listing(tmp_path) == before
