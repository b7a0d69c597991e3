"""A broken third-party plugin never takes ragkit down (nor does a
mis-declared query mode): one bad package must not break every command.

Throwaway plugin distributions are written as wheels and installed with pip
into throwaway venvs (see conftest.py), then the real CLI runs there.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

BROKEN_ERROR = "ragkit-broken-import cannot import: libfoo.so.1 not found"

BROKEN = {
    "ragkit_broken_import/__init__.py": "",
    "ragkit_broken_import/plugin.py": f"raise ImportError({BROKEN_ERROR!r})\n",
}
OTHER = {
    "ragkit_other_plugin/__init__.py": "",
    "ragkit_other_plugin/plugin.py": textwrap.dedent(
        """\
        from ragkit.plugins import hookimpl
        from ragkit.storage import SQLiteKVStore


        class OtherKV(SQLiteKVStore):
            name = "other-kv"


        @hookimpl
        def register_kv_stores(register):
            register(OtherKV)
        """
    ),
}
TYPO = {
    "ragkit_typo_hook/__init__.py": "",
    "ragkit_typo_hook/plugin.py": textwrap.dedent(
        """\
        from ragkit.plugins import hookimpl
        from ragkit.storage import SQLiteKVStore


        class TypoKV(SQLiteKVStore):
            name = "typo-kv"


        @hookimpl
        def register_kv_store(register):  # singular: no such hook
            register(TypoKV)
        """
    ),
}


def dup_plugin(package: str) -> dict[str, str]:
    return {
        f"{package}/__init__.py": "",
        f"{package}/plugin.py": textwrap.dedent(
            f"""\
            from ragkit.plugins import hookimpl
            from ragkit.storage import SQLiteKVStore


            class DupKV(SQLiteKVStore):
                name = "dup-kv"  # the same name as the other dup plugin's


            @hookimpl
            def register_kv_stores(register):
                register(DupKV)
            """
        ),
    }


@pytest.fixture(scope="module")
def broken_venv(plugin_venv, build_wheel):
    return plugin_venv(
        "broken",
        build_wheel("ragkit-broken-import", BROKEN, {"broken": "ragkit_broken_import.plugin"}),
        build_wheel("ragkit-other-plugin", OTHER, {"other": "ragkit_other_plugin.plugin"}),
    )


@pytest.fixture(scope="module")
def typo_dup_venv(plugin_venv, build_wheel):
    return plugin_venv(
        "typo-dup",
        build_wheel("ragkit-typo-hook", TYPO, {"typo": "ragkit_typo_hook.plugin"}),
        build_wheel("ragkit-dup-a", dup_plugin("ragkit_dup_a"), {"dup_a": "ragkit_dup_a.plugin"}),
        build_wheel("ragkit-dup-b", dup_plugin("ragkit_dup_b"), {"dup_b": "ragkit_dup_b.plugin"}),
    )


def rows_of(out) -> list[dict]:
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


# -- a plugin whose entry-point module raises at import ------------------------


def test_help_works(broken_venv, tmp_path):
    out = broken_venv.ragkit("--help", cwd=tmp_path)
    assert out.returncode == 0 and "plugins" in out.stdout, out.stderr


def test_plugins_shows_the_error_and_everything_else(broken_venv, tmp_path):
    out = broken_venv.ragkit("plugins", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if "ragkit-broken-import" in x)
    assert line.split()[:5] == ["-", "broken", "ragkit-broken-import", "1.0", "error"]
    assert f"ImportError: {BROKEN_ERROR}" in line
    assert "other-kv" in out.stdout and "sqlite" in out.stdout  # the rest still loads


def test_plugins_json_shows_the_error(broken_venv, tmp_path):
    rows = rows_of(broken_venv.ragkit("plugins", "--json", cwd=tmp_path))
    (bad,) = [r for r in rows if r["distribution"] == "ragkit-broken-import"]
    assert bad["status"] == "error" and bad["name"] == "broken" and bad["version"] == "1.0"
    assert bad["error"] == f"ImportError: {BROKEN_ERROR}"
    ok = {(r["kind"], r["name"]) for r in rows if r["status"] == "ok"}
    assert {("kv", "other-kv"), ("kv", "sqlite"), ("graph", "networkx")} <= ok


def test_config_and_doctor_still_work(broken_venv, tmp_path):
    out = broken_venv.ragkit("config", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    out = broken_venv.ragkit("config", "--json", cwd=tmp_path, env={"RAGKIT_KV": "other-kv"})
    assert out.returncode == 0 and json.loads(out.stdout)["problems"] == {}, out.stdout
    out = broken_venv.ragkit("doctor", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_unknown_name_hints_at_the_failed_plugin(broken_venv, tmp_path):
    out = broken_venv.ragkit("config", "--json", cwd=tmp_path, env={"RAGKIT_GRAPH": "nosuchgraph"})
    problem = json.loads(out.stdout)["problems"]["graph"]
    assert "no graph adapter named 'nosuchgraph'" in problem and "broken" in problem


def test_strict_mode_fails_and_names_the_plugin(broken_venv, tmp_path):
    env = {"RAGKIT_STRICT_PLUGINS": "1"}
    for args in (["plugins"], ["plugins", "--json"]):
        out = broken_venv.ragkit(*args, cwd=tmp_path, env=env)
        assert out.returncode != 0, out.stdout
        assert "'broken'" in out.stderr and "ragkit-broken-import" in out.stderr
        assert BROKEN_ERROR in out.stderr
        assert "Traceback" not in out.stderr
    assert broken_venv.ragkit("--help", cwd=tmp_path, env=env).returncode == 0


def test_load_plugins_skips_the_broken_one(broken_venv, tmp_path):
    env = {"RAGKIT_LOAD_PLUGINS": "other", "RAGKIT_STRICT_PLUGINS": "1"}
    rows = rows_of(broken_venv.ragkit("plugins", "--json", cwd=tmp_path, env=env))
    assert all(r["status"] == "ok" for r in rows), rows
    dists = {r["distribution"] for r in rows}
    assert "ragkit-other-plugin" in dists and "ragkit-broken-import" not in dists
    assert "ragkit" in dists  # built-ins always load


# -- a misspelled hook, and two plugins claiming one name ------------------------


def test_misspelled_hook_is_an_error(typo_dup_venv, tmp_path):
    rows = rows_of(typo_dup_venv.ragkit("plugins", "--json", cwd=tmp_path))
    (typo,) = [r for r in rows if r["distribution"] == "ragkit-typo-hook"]
    assert typo["status"] == "error" and "register_kv_store" in typo["error"]
    assert not any(r["name"] == "typo-kv" for r in rows)  # nothing registered by it
    strict = typo_dup_venv.ragkit("plugins", cwd=tmp_path, env={"RAGKIT_STRICT_PLUGINS": "1"})
    assert strict.returncode != 0 and "register_kv_store" in strict.stderr


def test_duplicate_name_is_an_error_naming_both_distributions(typo_dup_venv, tmp_path):
    rows = rows_of(typo_dup_venv.ragkit("plugins", "--json", cwd=tmp_path))
    dup = [r for r in rows if r["name"] == "dup-kv"]
    assert {r["distribution"] for r in dup} == {"ragkit-dup-a", "ragkit-dup-b"}
    assert any(r["status"] != "ok" and r["error"] for r in dup), dup

    # Resolving the name is the error, with both providers named ...
    script = textwrap.dedent(
        """\
        from ragkit.errors import DuplicateAdapterError
        from ragkit.plugins import get_registry
        registry = get_registry()
        assert registry.get("kv", "sqlite")  # other names resolve
        try:
            registry.get("kv", "dup-kv")
        except DuplicateAdapterError as exc:
            print(exc)
        else:
            raise SystemExit("no DuplicateAdapterError")
        """
    )
    out = typo_dup_venv.run("-c", script, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "'dup-kv'" in out.stdout
    assert "ragkit-dup-a 1.0" in out.stdout and "ragkit-dup-b 1.0" in out.stdout

    # ... and the CLI reports it where the name is configured.
    out = typo_dup_venv.ragkit("config", "--json", cwd=tmp_path, env={"RAGKIT_KV": "dup-kv"})
    problem = json.loads(out.stdout)["problems"]["kv"]
    assert "ragkit-dup-a" in problem and "ragkit-dup-b" in problem
    out = typo_dup_venv.ragkit("doctor", cwd=tmp_path, env={"RAGKIT_KV": "dup-kv"})
    assert out.returncode != 0 and "ragkit-dup-a" in out.stdout and "ragkit-dup-b" in out.stdout
    # Choosing one of the two entry points resolves it.
    env = {"RAGKIT_KV": "dup-kv", "RAGKIT_LOAD_PLUGINS": "dup_b"}
    out = typo_dup_venv.ragkit("config", "--json", cwd=tmp_path, env=env)
    assert json.loads(out.stdout)["problems"] == {}, out.stdout


# -- query modes: one without its search method, one taking a built-in's name ----

MODES = {
    "ragkit_broken_modes/__init__.py": "",
    "ragkit_broken_modes/modes.py": textwrap.dedent(
        """\
        from ragkit.query.modes import Found, QueryMode


        class NoSearch(QueryMode):
            name = "no-search"  # retrieves a context, but search() was forgotten


        class TopChunk(QueryMode):
            extracts_keywords = False

            def texts(self, question, keywords, param):
                return [question]

            async def search(self, question, keywords, param, searcher):
                return Found(chunks=await searcher.chunks(question, 1))


        class MyNaive(TopChunk):
            name = "naive"  # a built-in mode's name


        class Sharp(TopChunk):
            name = "sharp"  # fine: the plugin's good modes still register
        """
    ),
    "ragkit_broken_modes/plugin.py": textwrap.dedent(
        """\
        from ragkit.plugins import hookimpl


        @hookimpl
        def register_query_modes(register):
            from ragkit_broken_modes.modes import MyNaive, NoSearch, Sharp

            register(NoSearch)
            register(MyNaive)
            register(Sharp)
        """
    ),
}
QUESTION = "Who leads the project whose supplier's delivery slipped?"


@pytest.fixture(scope="module")
def modes_venv(plugin_venv, build_wheel, tmp_path_factory):
    wheel = build_wheel("ragkit-broken-modes", MODES, {"broken_modes": "ragkit_broken_modes.plugin"})
    venv = plugin_venv("broken-modes", wheel)
    index = tmp_path_factory.mktemp("broken-modes-index")
    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus" / "en"
    out = venv.ragkit("index", str(corpus), cwd=index, env={"RAGKIT_LLM": "offline"})
    assert out.returncode == 0, out.stdout + out.stderr
    return venv, index


def test_mis_declared_modes_are_listed_with_the_reason(modes_venv):
    venv, index = modes_venv
    assert venv.ragkit("--help", cwd=index).returncode == 0
    rows = rows_of(venv.ragkit("plugins", "--json", cwd=index))
    modes = {(r["name"], r["distribution"]): r for r in rows if r["kind"] == "query_mode"}
    refused = modes[("no-search", "ragkit-broken-modes")]
    assert refused["status"] == "error" and "defines no search(" in refused["error"]
    for dist in ("ragkit", "ragkit-broken-modes"):
        clash = modes[("naive", dist)]
        assert clash["status"] == "conflict" and "ragkit-broken-modes (broken_modes)" in clash["error"]
    assert modes[("sharp", "ragkit-broken-modes")]["status"] == "ok"
    assert modes[("mix", "ragkit")]["status"] == "ok"


def test_queries_in_other_modes_still_work(modes_venv):
    venv, index = modes_venv
    env = {"RAGKIT_LLM": "offline"}
    for mode in ("mix", "ppr", "sharp"):
        out = venv.ragkit("query", QUESTION, "--mode", mode, "--context-only", "--json", cwd=index, env=env)
        assert out.returncode == 0, (mode, out.stdout + out.stderr)
        assert json.loads(out.stdout)["chunks"], mode
    out = venv.ragkit("query", QUESTION, cwd=index, env=env)  # the default mode, with an answer
    assert out.returncode == 0 and "References:" in out.stdout, out.stdout + out.stderr


def test_the_broken_modes_are_clear_errors(modes_venv):
    venv, index = modes_venv
    out = venv.ragkit("query", QUESTION, "--mode", "no-search", cwd=index)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "no query mode named 'no-search'" in out.stderr and "was refused" in out.stderr
    assert "ragkit-broken-modes 1.0" in out.stderr and "defines no search(" in out.stderr
    out = venv.ragkit("query", QUESTION, "--mode", "naive", cwd=index)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "'naive' is registered by more than one plugin" in out.stderr and "ragkit-broken-modes 1.0" in out.stderr
    # Loading only other plugins gives the built-in naive back.
    env = {"RAGKIT_LLM": "offline", "RAGKIT_LOAD_PLUGINS": "none"}
    out = venv.ragkit("query", QUESTION, "--mode", "naive", "--context-only", cwd=index, env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def test_strict_mode_names_the_broken_modes(modes_venv):
    venv, index = modes_venv
    out = venv.ragkit("plugins", cwd=index, env={"RAGKIT_STRICT_PLUGINS": "1"})
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "query_mode 'no-search' refused" in out.stderr and "'naive'" in out.stderr
