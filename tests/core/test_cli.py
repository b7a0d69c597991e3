"""The CLI as a user runs it: a subprocess of the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ragkit

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    full_env.update(env or {})
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120)


def test_version_and_help(tmp_path):
    out = run("--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == f"ragkit {ragkit.__version__}"
    out = run("--help", cwd=tmp_path)
    assert out.returncode == 0 and "plugins" in out.stdout and "config" in out.stdout


def test_plugins_lists_all_kinds(tmp_path):
    out = run("plugins", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    kinds = {r["kind"] for r in rows if r["status"] == "ok"}
    assert {"kv", "vector", "graph", "doc_status", "llm", "embedder", "reranker"} <= kinds
    text = run("plugins", cwd=tmp_path).stdout
    assert text.splitlines()[0].split() == ["kind", "name", "distribution", "version", "status", "error"]


def test_config_shows_sources_and_masks_secrets(tmp_path):
    (tmp_path / "ragkit.toml").write_text(
        '[llm]\nname = "scripted"\n[llm.options]\ndefault = "x"\n'
        '[vector]\nname = "numpy"\n[vector.options]\n', encoding="utf-8"
    )
    env = {"RAGKIT_WORKSPACE": "ws1", "RAGKIT_GRAPH__PASSWORD": "hunter2", "RAGKIT_KV__API_KEY": "sk-secret"}
    out = run("config", "--json", cwd=tmp_path, env=env)
    assert "hunter2" not in out.stdout and "sk-secret" not in out.stdout
    data = json.loads(out.stdout)
    by_key = {s["key"]: s for s in data["settings"]}
    assert by_key["workspace"] == {"key": "workspace", "value": "ws1", "source": "env (RAGKIT_WORKSPACE)"}
    assert by_key["graph.options.password"]["value"] == "****"
    assert by_key["llm.options.default"]["source"] == "file (ragkit.toml)"
    assert by_key["embedder.name"]["source"] == "default"
    # The adapters reject the unknown options, and config says so.
    assert "password" in data["problems"]["graph"] and out.returncode == 0
    text = run("config", cwd=tmp_path, env=env)
    assert "hunter2" not in text.stdout and "****" in text.stdout and text.returncode == 1


def test_doctor_round_trip_on_embedded_defaults(tmp_path):
    out = run("doctor", "--json", cwd=tmp_path, env={"RAGKIT_LLM": "scripted"})
    assert out.returncode == 0, out.stdout + out.stderr
    results = {r["check"]: r for r in json.loads(out.stdout)}
    assert {r["status"] for r in results.values()} == {"ok"}
    assert (tmp_path / "ragkit_data" / "default").is_dir()


def test_unknown_backend_is_a_clear_error(tmp_path):
    out = run("doctor", cwd=tmp_path, env={"RAGKIT_VECTOR": "qdrantt"})
    assert out.returncode == 1
    assert "no vector adapter named 'qdrantt'. Installed: " in out.stdout
    installed = out.stdout.split("Installed: ", 1)[1].split(".", 1)[0].split(", ")
    assert "numpy" in installed and installed == sorted(installed)


def test_bad_settings_file_exits_2_with_message(tmp_path):
    (tmp_path / "ragkit.toml").write_text("graph = [\n", encoding="utf-8")
    out = run("config", cwd=tmp_path)
    assert out.returncode == 2 and "not valid TOML" in out.stderr
