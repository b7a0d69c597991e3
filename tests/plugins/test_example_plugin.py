"""The example third-party plugin, installed with pip into a throwaway venv:
ragkit finds it through its entry point, uses it from settings, it passes its
own contract test (the 14-line file a third party would write), and its query
mode runs from the Python API and the CLI's ``--mode``."""

from __future__ import annotations

import json
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ragkit.protocols.base import Capability
from ragkit.testing.contracts import KVStoreContract, contract_test_names
from ragkit.testing.contracts.base.contract import required_capability

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
        ("kv", "example-memory", "0.1.0", "ok", None),
        ("query_mode", "keyword-chunks", "0.1.0", "ok", None),
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
    # Only the tests of what it does not declare skip: PERSISTENT (close and flush
    # durability: it keeps nothing on disk) and TEXT_SEARCH (no text index).
    undeclared = (Capability.PERSISTENT, Capability.TEXT_SEARCH)
    gated = sorted(f"adapter does not declare Capability.{required_capability(KVStoreContract, n).name}"
                   for n in contract_test_names(KVStoreContract)
                   if required_capability(KVStoreContract, n) in undeclared)
    assert sorted(skipped) == gated and len(gated) > 6, skipped


QUESTION = "Which supplier of Project Haijia also delivers to Project Qinghe?"
API_SCRIPT = textwrap.dedent(
    """\
    import asyncio, json, sys
    from ragkit.query.modes import available_modes
    from ragkit.rag import RAG
    from ragkit.settings import load_settings

    async def main():
        async with RAG(load_settings().settings) as rag:
            mine = await rag.aquery(sys.argv[1], mode="keyword-chunks", only_need_context=True, chunk_top_k=3)
            texts = [sys.argv[1], *mine.metadata["keywords"]["low_level"]]
            # What the mode promises: each text's nearest chunks, interleaved, best first.
            lists = [(await rag.aquery(t, mode="naive", only_need_context=True, chunk_top_k=3)).chunks for t in texts]
            expected = []
            for rank in range(3):
                for chunks in lists:
                    if rank < len(chunks) and chunks[rank]["id"] not in expected:
                        expected.append(chunks[rank]["id"])
            mode = next(m for m in available_modes() if m.name == "keyword-chunks")
            print(json.dumps({"ids": [c["id"] for c in mine.chunks], "expected": expected[:3], "texts": texts,
                              "stages": sorted({c["stage"] for c in mine.chunks}), "entities": len(mine.entities),
                              "distribution": mode.distribution, "mode": mine.metadata["mode"]}))

    asyncio.run(main())
    """
)


def test_example_query_mode_runs_from_the_api_and_the_cli(venv, tmp_path):
    env = {"RAGKIT_LLM": "offline"}
    out = venv.ragkit("index", str(EXAMPLE.parents[1] / "examples" / "corpus" / "en"), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr

    out = venv.run("-c", API_SCRIPT, QUESTION, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    got = json.loads(out.stdout)
    assert got["mode"] == "keyword-chunks" and got["distribution"] == "ragkit-example-plugin"
    assert len(got["texts"]) > 1, "the offline LLM finds named things in the question"
    assert got["ids"] == got["expected"] and len(got["ids"]) == 3
    assert got["stages"] == ["chunk_vectors"] and got["entities"] == 0

    help_text = venv.ragkit("query", "--help", cwd=tmp_path, env=env).stdout
    assert "keyword-chunks" in "".join(help_text.split())  # argparse may wrap at the hyphen
    out = venv.ragkit("query", QUESTION, "--mode", "keyword-chunks", "--context-only", "--json", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["metadata"]["mode"] == "keyword-chunks" and result["chunks"] and not result["entities"]
    assert {c["stage"] for c in result["chunks"]} == {"chunk_vectors"}
    assert {c["id"] for c in result["chunks"]} >= set(got["ids"])
