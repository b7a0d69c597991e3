"""Small mistakes a user of the CLI met, each as a user meets it through
the ``ragkit`` command (real child processes, offline LLM, embedded stores):

- a file name holding a newline is shown escaped, on one report line;
- a bad workspace name is echoed in the error (as the API's error does);
- the offline-LLM notice is printed by commands that call the model, not by
  ``ragkit delete``;
- ``--config /dev/null`` means "no settings", and a missing ``--config`` file
  does not blame ``RAGKIT_CONFIG``;
- the GraphML export does not report "0 chunks", and the JSON export holds
  every chunk, also those the graph does not cite;
- the offline answer without context speaks the question's language.

Troubleshooting: each test runs the command it names; run it by hand in a
scratch folder with the same environment (``env`` below).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from ragkit.offline import NOTICE, OfflineLLM
from ragkit.protocols import ChatRequest


def env(tmp_path: Path, **more: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    out.update(RAGKIT_WORKING_DIR=str(tmp_path / "data"), **more)
    return out


def ragkit(tmp_path: Path, *args: str, **more: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragkit", *args], cwd=tmp_path, env=env(tmp_path, **more),
                          capture_output=True, text=True, timeout=300)


def test_a_newline_in_a_file_name_is_escaped_on_one_line(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "two\nlines.txt").write_text("")
    (folder / "ok.txt").write_text("Alice Moreau leads the Haijia project in Ningbo.")
    out = ragkit(tmp_path, "index", "c")
    assert out.returncode == 0, out.stderr
    assert "c/two\\x0alines.txt: skipped: empty file" in out.stdout.splitlines(), out.stdout


def test_a_bad_workspace_name_is_echoed(tmp_path):
    out = ragkit(tmp_path, "status", RAGKIT_WORKSPACE="Team/A")
    assert out.returncode == 2 and "'Team/A' is not a workspace name" in out.stderr, out.stderr


def test_the_offline_notice_comes_with_model_calls_only(tmp_path):
    (tmp_path / "a.txt").write_text("Alice Moreau leads the Haijia project in Ningbo.")
    index = ragkit(tmp_path, "index", "a.txt")
    assert index.returncode == 0 and index.stderr.count(NOTICE) == 1, index.stderr
    delete = ragkit(tmp_path, "delete", "a.txt")
    assert delete.returncode == 0 and "deleted 1 document(s)" in delete.stdout, delete.stderr
    assert NOTICE not in delete.stderr
    status = ragkit(tmp_path, "status")
    assert status.returncode == 0 and NOTICE not in status.stderr


def test_config_dev_null_is_no_settings_and_a_missing_file_blames_the_option(tmp_path):
    (tmp_path / "data" / "default").mkdir(parents=True)  # an existing (empty) workspace: reads make none
    out = ragkit(tmp_path, "--config", os.devnull, "status")
    assert out.returncode == 0 and "0 chunks" in out.stdout, out.stderr
    missing = ragkit(tmp_path, "--config", str(tmp_path / "nope.toml"), "status")
    assert missing.returncode == 2 and "nope.toml does not exist" in missing.stderr
    assert "RAGKIT_CONFIG" not in missing.stderr
    from_env = ragkit(tmp_path, "status", RAGKIT_CONFIG=str(tmp_path / "nope.toml"))
    assert from_env.returncode == 2 and "(from RAGKIT_CONFIG)" in from_env.stderr


def test_exports_say_what_they_hold(tmp_path):
    (tmp_path / "names.txt").write_text("Alice Moreau leads the Haijia project in Ningbo.")
    (tmp_path / "plain.txt").write_text("nothing here names anyone; it is all lower case and plain.")
    assert ragkit(tmp_path, "index", "names.txt", "plain.txt").returncode == 0
    graphml = ragkit(tmp_path, "export", str(tmp_path / "g.graphml"))
    assert graphml.returncode == 0 and "0 chunks" not in graphml.stdout and "the graph only" in graphml.stdout
    exported = ragkit(tmp_path, "export", str(tmp_path / "g.json"))
    assert exported.returncode == 0, exported.stderr
    data = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))
    cited = {c for item in data["nodes"] + data["edges"] for c in item["properties"]["source_ids"]}
    chunks = {c["id"]: c for c in data["chunks"]}
    assert len(chunks) == 2 and len(cited) == 1, (cited, chunks)  # the plain text's chunk is not cited...
    assert "all lower case" in chunks[(set(chunks) - cited).pop()]["content"]  # ...and is exported
    assert "and 2 chunks" in exported.stdout


def test_the_offline_answer_without_context_speaks_the_questions_language():
    from ragkit.offline.answer import BYPASS, BYPASS_ZH

    llm = OfflineLLM()

    def answer(question: str) -> str:
        return asyncio.run(llm.complete(ChatRequest(prompt=question, role="answer"))).text

    assert answer("火星上有几颗卫星？") == BYPASS_ZH
    assert answer("How many moons has Mars?") == BYPASS
