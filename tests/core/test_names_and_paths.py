"""Names and paths from settings are checked whole, so a name cannot reach
outside its folder.

``re.match`` with a pattern ending in ``$`` accepts a trailing newline
(``$`` matches before it), so every name rule uses ``fullmatch``; a NUL in
``working_dir`` is a settings error, not a traceback from the first ``mkdir``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragkit.errors import ConfigError, InvalidValueError
from ragkit.protocols.base import StoreConfig
from ragkit.settings import load_settings

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


@pytest.mark.parametrize("name", ["abc\n", "abc\r", "abc\n\n", "a b", ""])
def test_workspace_and_store_names_must_match_whole(name):
    with pytest.raises(ConfigError, match="workspace"):
        load_settings(env={"RAGKIT_WORKSPACE": name})
    for field in ("workspace", "namespace"):
        with pytest.raises(ValidationError, match="not a valid name"):
            StoreConfig(**{"namespace": "chunks", field: name})
    assert load_settings(env={"RAGKIT_WORKSPACE": "team-a_1"}).settings.workspace == "team-a_1"


def test_plugin_name_rules_reject_a_trailing_newline():
    redis = pytest.importorskip("ragkit_redis")
    with pytest.raises(ValidationError, match="key_prefix"):
        redis.RedisOptions(key_prefix="ragkit\n")
    cypher = pytest.importorskip("ragkit_neo4j.cypher")
    for args in (("ragkit\n", "default", "chunks"), ("ragkit", "default\n", "chunks"), ("ragkit", "w", "n\n")):
        with pytest.raises(InvalidValueError):
            cypher.store_label(*args)
    neo4j = pytest.importorskip("ragkit_neo4j.graph")
    with pytest.raises(ValidationError, match="label_prefix"):
        neo4j.Neo4jOptions(label_prefix="ragkit\n")
    qdrant = pytest.importorskip("ragkit_qdrant._filter")  # its own key-quoting helper, tested directly
    assert qdrant.json_key("lang") == "lang" and qdrant.json_key("lang\n") == '"lang\n"'


def test_a_nul_in_working_dir_is_a_settings_error(tmp_path):
    with pytest.raises(ConfigError, match="working_dir.*NUL"):
        load_settings(env={"RAGKIT_WORKING_DIR": "data\x00x"})
    config = tmp_path / "ragkit.toml"
    config.write_text('working_dir = "data\\u0000x"\n')
    with pytest.raises(ConfigError, match=f"in {config}: working_dir.*NUL"):
        load_settings(config, env={})

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    out = subprocess.run([RAGKIT, "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "working_dir: Value error, contains a NUL character" in out.stderr
