"""``ragkit query`` as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.testing.corpus import write_passages

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"
QUESTION = "Who is the current editor of the Journal of Mathematical Physics?"


def ragkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    env["RAGKIT_LLM"] = "replay"
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli-query")
    write_passages(root / "corpus", limit=12)
    out = ragkit("index", "corpus", cwd=root)
    assert out.returncode == 0, out.stderr
    return root


def test_answer_with_references_json_and_stream(indexed):
    out = ragkit("query", QUESTION, "--mode", "local", "--json", cwd=indexed)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert "Jan Philip Solovej" in result["context"]
    assert result["metadata"]["mode"] == "local" and result["references"]
    paths = {r["file_path"] for r in result["references"]}
    assert "corpus/passage-00.txt" in paths
    text = ragkit("query", QUESTION, "--mode", "local", cwd=indexed).stdout
    streamed = ragkit("query", QUESTION, "--mode", "local", "--stream", cwd=indexed).stdout
    assert text == streamed
    assert text.startswith(result["answer"]) and "\nReferences:\n[1] corpus/" in text


def test_context_only_prompt_only_and_doc_scope(indexed):
    context = ragkit("query", QUESTION, "--mode", "mix", "--context-only", cwd=indexed)
    assert context.returncode == 0 and context.stdout.startswith("-----Entities")
    prompt = ragkit("query", QUESTION, "--prompt-only", cwd=indexed).stdout
    assert "---Context---" in prompt and QUESTION in prompt
    doc = json.loads(ragkit("query", QUESTION, "--json", cwd=indexed).stdout)["references"][-1]["doc_id"]
    scoped = json.loads(ragkit("query", QUESTION, "--json", "--doc", doc, cwd=indexed).stdout)
    assert {c["doc_id"] for c in scoped["chunks"]} == {doc}


def test_bad_query_is_a_clear_error(indexed):
    out = ragkit("query", "  ", cwd=indexed)
    assert out.returncode == 2 and "question is empty" in out.stderr
    out = ragkit("query", QUESTION, "--max-total-tokens", "40", "--context-only", cwd=indexed)
    assert out.returncode == 2 and "raise max_total_tokens" in out.stderr
