"""The example third-party plugin, installed with pip into a throwaway venv:
ragkit finds it through its entry point, uses it from settings, and it passes
its own contract test (the 14-line file a third party would write)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ragkit-example-plugin"


@pytest.fixture(scope="module")
def venv(plugin_venv, tmp_path_factory):
    # pip builds a source tree in place (build/, *.egg-info): install from a copy.
    source = tmp_path_factory.mktemp("example-src") / EXAMPLE.name
    shutil.copytree(
        EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    return plugin_venv("example", source)


def test_contract_file_is_at_most_15_lines():
    lines = (EXAMPLE / "tests" / "test_contract.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 15


def test_installed_copy_not_the_source_tree(venv, tmp_path):
    out = venv.run("-c", "import ragkit_example_plugin as m; print(m.__file__)", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(venv.root), out.stdout


def test_plugins_lists_example_memory(venv, tmp_path):
    out = venv.ragkit("plugins", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    mine = [r for r in rows if r["distribution"] == "ragkit-example-plugin"]
    assert [(r["kind"], r["name"], r["version"], r["status"], r["error"]) for r in mine] == [
        ("kv", "example-memory", "0.1.0", "ok", None)
    ]
    text = venv.ragkit("plugins", cwd=tmp_path)
    assert text.returncode == 0
    line = next(x for x in text.stdout.splitlines() if "example-memory" in x)
    assert line.split() == ["kv", "example-memory", "ragkit-example-plugin", "0.1.0", "ok"]


def test_options_model_validates_settings(venv, tmp_path):
    env = {"RAGKIT_KV": "example-memory", "RAGKIT_KV__MAX_VALUE_BYTES": "1000"}
    out = venv.ragkit("config", "--json", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["problems"] == {}

    typo = {"RAGKIT_KV": "example-memory", "RAGKIT_KV__MAX_VALUE_BYTE": "1000"}
    out = venv.ragkit("config", "--json", cwd=tmp_path, env=typo)
    problem = json.loads(out.stdout)["problems"]["kv"]
    assert "max_value_byte" in problem and "xtra" in problem  # "Extra inputs are not permitted"


def test_doctor_round_trips_through_it(venv, tmp_path):
    out = venv.ragkit("doctor", "--json", cwd=tmp_path, env={"RAGKIT_KV": "example-memory"})
    assert out.returncode == 0, out.stdout + out.stderr
    kv = next(r for r in json.loads(out.stdout) if r["check"] == "kv")
    assert kv["adapter"] == "example-memory" and kv["status"] == "ok"
    assert "not persistent" in kv["detail"]


def test_full_kv_contract_passes(venv, tmp_path):
    out = venv.run(
        "-m", "pytest", EXAMPLE / "tests", "-q", "-p", "no:cacheprovider",
        cwd=tmp_path, env={"RAGKIT_CONTRACT_EXAMPLES": "25"},
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and "failed" not in out.stdout


def test_ragkit_contract_suite_picks_it_up(venv, tmp_path):
    """tests/contract generates a contract class for every registered adapter:
    once installed, the plugin is tested there with no file of its own."""
    repo = EXAMPLE.parents[1]
    report = tmp_path / "report.xml"
    out = venv.run(
        "-m", "pytest", repo / "tests" / "contract" / "test_adapters.py", "-q",
        "-p", "no:cacheprovider", "--rootdir", repo, "-c", repo / "pyproject.toml",
        "--ragkit-adapters", "kv:example-memory", f"--junitxml={report}",
        cwd=tmp_path, env={"RAGKIT_CONTRACT_EXAMPLES": "10"},
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    cases = [
        c for c in ET.parse(report).getroot().iter("testcase")
        if c.get("classname", "").endswith("TestKV_example_memory")
    ]
    assert len(cases) >= 30
    skipped = [c.find("skipped").get("message", "") for c in cases if c.find("skipped") is not None]
    assert skipped == ["adapter does not declare Capability.PERSISTENT"], skipped
