"""``ragkit index`` on inputs that fail: a file name
that is not UTF-8 and a named file that does not exist fail alone, the good
files are indexed, the exit status is 1 (0: all indexed or skipped on purpose;
2: usage or settings), and ``--dry-run`` reports the same lines and status."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


def ragkit(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    env["RAGKIT_WORKING_DIR"] = str(cwd / "data")  # the offline LLM: no model needed
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, timeout=300)


def lines(out: bytes) -> list[str]:
    return out.decode("utf-8").splitlines()  # strict: the report must be valid UTF-8


@pytest.fixture
def folder(tmp_path) -> Path:
    """``d`` with a good file and ``bad\\xff.txt`` (made as the issue's printf does)."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "good.txt").write_text("Alice met Bob in Paris. Bob works for Acme in Berlin.")
    try:
        with open(os.fsencode(d) + b"/bad\xff.txt", "wb") as fh:
            fh.write(b"x")
    except OSError as exc:
        pytest.skip(f"this file system refuses non-UTF-8 names: {exc}")
    return d


def test_a_non_utf8_name_fails_alone_and_dry_run_says_the_same(tmp_path, folder):
    dry = ragkit("index", "d", "--dry-run", cwd=tmp_path)
    real = ragkit("index", "d", cwd=tmp_path)
    expected = "d/bad\\xff.txt: failed: name not valid UTF-8"
    dry_lines, real_lines = lines(dry.stdout), lines(real.stdout)
    assert real.returncode == 1 and dry.returncode == 1, (real.stderr, dry.stderr)
    assert real_lines[0].startswith(expected) and "indexed 1 documents" in real_lines[-1], real_lines
    assert "1 input(s) could not be loaded" in real_lines[-1]
    # The dry run lists exactly the lines the run listed, and counts what it indexed.
    assert dry_lines[: len(real_lines) - 1] == real_lines[:-1]
    assert "dry run: 1 documents to index" in dry.stdout.decode()

    status = json.loads(ragkit("status", "--json", cwd=tmp_path).stdout)
    assert status["documents"]["processed"] == 1 and status["documents"]["failed"] == 0
    again = ragkit("index", "d", "--json", cwd=tmp_path)
    result = json.loads(again.stdout.decode("utf-8"))
    assert again.returncode == 1 and result["skipped_unchanged"] == 1
    assert [f["path"] for f in result["files"] if f["outcome"] == "failed"] == ["d/bad\\xff.txt"]


def test_the_bad_name_given_on_the_command_line_fails_too(tmp_path, folder):
    out = ragkit("index", os.fsencode(folder) + b"/bad\xff.txt", folder / "good.txt", cwd=tmp_path)
    assert out.returncode == 1 and "bad\\xff.txt: failed: name not valid UTF-8" in out.stdout.decode()
    assert "indexed 1 documents" in out.stdout.decode()


def test_exit_status_says_whether_a_named_input_failed(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.md").write_text("Carol founded Initech in Austin.")
    (d / "picture.png").write_bytes(b"\x89PNG")  # skipped on purpose: not a failure
    ok = ragkit("index", "docs", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    missing = ragkit("index", "docs", "notes.md", cwd=tmp_path)
    assert missing.returncode == 1 and "notes.md: failed: not found" in missing.stdout.decode()
    assert "1 input(s) could not be loaded" in missing.stdout.decode()
    assert ragkit("index", "notes.md", "--dry-run", cwd=tmp_path).returncode == 1
    usage = ragkit("index", cwd=tmp_path)
    assert usage.returncode == 2  # argparse: no path given
