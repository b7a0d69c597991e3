"""Issue 32 item 3: after `make demo`, later commands find its data through the
settings file it writes (``$(DEMO_DIR)/ragkit.toml``), from any folder, as the
README's quick start says. Runs the Makefile's ``demo-run`` (``demo`` without
the install step) on the hash embedder, which indexes in seconds.

Troubleshooting: ``make -n demo-run`` prints what the target runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    if shutil.which("make") is None:
        pytest.fail("make is not installed: the README's quick start needs it")
    folder = tmp_path_factory.mktemp("demo") / ".demo"
    out = subprocess.run(["make", "--no-print-directory", "demo-run", f"VENV={VENV}", f"DEMO_DIR={folder}",
                          "DEMO_EMBEDDER=hash"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "References:" in out.stdout and f"--config {folder}/ragkit.toml status" in out.stdout
    return folder


def test_later_commands_find_the_demo_data_from_any_folder(demo, tmp_path):
    config = str(demo / "ragkit.toml")
    status = subprocess.run([str(VENV / "bin" / "ragkit"), "--config", config, "status"], cwd=tmp_path,
                            env=env(), capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    assert re.search(r"processed\s+13\b", status.stdout), status.stdout
    documents = subprocess.run([str(VENV / "bin" / "ragkit"), "--config", config, "documents"], cwd=tmp_path,
                               env=env(), capture_output=True, text=True, timeout=120)
    assert documents.returncode == 0 and "haijia" in documents.stdout, documents.stdout + documents.stderr
    assert not (tmp_path / "ragkit_data").exists(), "a command made an empty default working dir"


def test_the_readme_quick_start_names_the_demo_settings():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme[readme.index("make demo"):readme.index("## Commands")]
    assert "ragkit --config .demo/ragkit.toml status" in quick_start
