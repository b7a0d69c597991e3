"""Issue 32 item 3: a read-only command on a working dir that holds no
workspace says so, names the folder it looked in and how to point at the
data (after ``make demo``: its ``ragkit.toml``), and creates nothing.

Before, ``ragkit documents`` in a fresh folder answered "0 of 0" and left a
``ragkit_data/default`` behind, and ``status`` made an empty workspace. (On the
embedded doc status, where the folder is sure evidence; ``query`` and
``delete`` answer for themselves, ``ragkit/cli/workspace.py`` says why.)

Troubleshooting: run the command by hand in an empty folder with no
``RAGKIT_*`` variables set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

READS = [["status"], ["documents"], ["check"], ["export", "out.json"]]


def ragkit(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    return subprocess.run([sys.executable, "-m", "ragkit", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_read_of_a_missing_workspace_names_the_folder_and_creates_nothing(tmp_path, command):
    out = ragkit(tmp_path, *command)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"no workspace 'default' in {tmp_path.resolve() / 'ragkit_data'}" in out.stderr
    assert "--config .demo/ragkit.toml" in out.stderr and "ragkit index PATH" in out.stderr
    assert list(tmp_path.iterdir()) == [], "a read-only command created files"


def test_the_same_commands_read_a_workspace_once_indexed(tmp_path):
    (tmp_path / "a.md").write_text("Alice Moreau leads the Haijia project in Ningbo.\n")
    assert ragkit(tmp_path, "index", "a.md").returncode == 0
    for command in READS:
        out = ragkit(tmp_path, *command)
        assert out.returncode == 0, (command, out.stderr)
