"""Issue 4's acceptance, as a user runs it: all 1,890 MuSiQue passages, one file
each, indexed by ``ragkit index`` with the replay LLM on the embedded defaults;
``ragkit status`` shows them processed and ``ragkit check`` finds no problem."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ragkit.testing.corpus import write_passages
from ragkit.testing.replay import load_musique

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


def ragkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    env["RAGKIT_LLM"] = "replay"
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_all_passages_index_and_check_clean(tmp_path):
    passages = len(load_musique()[1])
    assert passages == 1890
    write_passages(tmp_path / "corpus")

    out = ragkit("index", "corpus", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["processed"] == passages and not result["failed"]
    assert result["llm"]["calls"]["extraction"] == result["chunks"] == passages

    out = ragkit("status", "--json", cwd=tmp_path)
    status = json.loads(out.stdout)
    assert status["documents"] == {"pending": 0, "processing": 0, "processed": passages, "failed": 0}
    assert status["entities"] > 10_000 and status["relations"] > 10_000

    out = ragkit("check", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip().endswith("no problems found"), out.stdout
