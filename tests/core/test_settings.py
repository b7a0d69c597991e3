"""Settings: precedence, sources, masking, clear errors."""

from __future__ import annotations

import pytest

from ragkit.backends import build_store, validate_options
from ragkit.errors import AdapterNotFoundError, ConfigError
from ragkit.redact import redact
from ragkit.settings import load_settings, mask_secrets


def write(tmp_path, text: str):
    path = tmp_path / "ragkit.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_select_embedded_backends():
    loaded = load_settings(env={})
    s = loaded.settings
    assert (s.kv.name, s.vector.name, s.graph.name, s.doc_status.name) == (
        "sqlite", "numpy", "sqlite", "sqlite",
    )
    assert loaded.sources["kv.name"] == "default"


def test_environment_wins_over_file_and_sources_are_tracked(tmp_path):
    path = write(tmp_path, 'workspace = "from-file"\n[graph]\nname = "networkx"\n[llm]\nname = "scripted"\n[llm.options]\ndefault = "hi"\n')
    loaded = load_settings(path, env={"RAGKIT_WORKSPACE": "from-env", "RAGKIT_LLM__LATENCY": "0.5"})
    assert loaded.settings.workspace == "from-env"
    assert loaded.sources["workspace"] == "env (RAGKIT_WORKSPACE)"
    assert loaded.sources["graph.name"].startswith("file (")
    assert loaded.settings.llm.options == {"default": "hi", "latency": 0.5}
    assert loaded.sources["llm.options.latency"] == "env (RAGKIT_LLM__LATENCY)"
    assert loaded.sources["llm.options.default"].startswith("file (")


def test_changing_backend_drops_default_options():
    loaded = load_settings(env={"RAGKIT_EMBEDDER": "other", "RAGKIT_EMBEDDER__X": "1"})
    assert loaded.settings.embedder.options == {"x": 1}


def test_config_path_from_env(tmp_path):
    path = write(tmp_path, 'workspace = "w2"\n')
    assert load_settings(env={"RAGKIT_CONFIG": str(path)}).settings.workspace == "w2"


def test_missing_file_named(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", env={})


def test_unknown_top_level_key_is_an_error(tmp_path):
    path = write(tmp_path, "vectr = 'numpy'\n")
    with pytest.raises(ConfigError, match="unknown setting.*vectr"):
        load_settings(path, env={})


def test_invalid_toml_names_file(tmp_path):
    path = write(tmp_path, "workspace = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(path, env={})


def test_invalid_workspace_rejected():
    with pytest.raises(ConfigError, match="workspace"):
        load_settings(env={"RAGKIT_WORKSPACE": "../escape"})


def test_secrets_masked_by_name_and_in_urls():
    data = {
        "llm": {"options": {"api_key": "sk-live", "password": "p", "auth_token": "t", "model": "gpt"}},
        "vector": {"options": {"url": "http://user:hunter2@host:8000/x"}},
    }
    masked = mask_secrets(data)
    assert masked["llm"]["options"] == {"api_key": "****", "password": "****", "auth_token": "****", "model": "gpt"}
    assert masked["vector"]["options"]["url"] == "http://user:****@host:8000/x"
    assert "hunter2" not in repr(masked) and "sk-live" not in repr(masked)


def test_secret_names_are_told_from_counts_of_tokens():
    from ragkit.redact import is_secret

    for name in ("api_key", "API-KEY", "apikey", "auth_token", "authorization", "password", "client_secret", "accessToken"):
        assert is_secret(name), name
    for name in ("max_tokens", "summary_min_tokens", "chunk_size", "monkeys", "keywords"):
        assert not is_secret(name), name


def test_unknown_backend_lists_installed():
    loaded = load_settings(env={"RAGKIT_GRAPH": "neo5j"})
    with pytest.raises(AdapterNotFoundError, match="neo5j.*Installed: (.*, )?networkx"):
        build_store(loaded.settings, "graph", "entities")
    assert "neo5j" in validate_options(loaded.settings)["graph"]


def test_adapter_validates_its_own_options():
    loaded = load_settings(env={"RAGKIT_EMBEDDER__DIMENSION": "not-a-number"})
    problem = validate_options(loaded.settings)["embedder"]
    assert problem and "dimension" in problem


def test_index_section_from_file_and_nested_environment(tmp_path):
    path = write(tmp_path, "[index]\nchunk_size = 600\nllm_concurrency = 3\n[index.extract]\ngleaning = 1\nentity_types = ['person']\n")
    loaded = load_settings(path, env={"RAGKIT_INDEX__CHUNK_OVERLAP": "50", "RAGKIT_INDEX__EXTRACT__GLEANING": "2"})
    index = loaded.settings.index
    assert (index.chunk_size, index.chunk_overlap, index.llm_concurrency) == (600, 50, 3)
    assert index.extract.gleaning == 2 and index.extract.entity_types == ["person"]
    assert loaded.sources["index.extract.gleaning"] == "env (RAGKIT_INDEX__EXTRACT__GLEANING)"
    assert loaded.sources["index.chunk_size"].startswith("file")
    assert loaded.sources["index.merge.language"] == "default"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGKIT_INDEX__CHUNK_OVERLAP": "1300"}, "overlap must be at least 0 and smaller than the chunk size"),
        ({"RAGKIT_INDEX__CHUNK_SIZ": "10"}, "index.chunk_siz: Extra inputs are not permitted"),
        ({"RAGKIT_INDEX__EXTRACT__GLEANING": "9"}, "index.extract.gleaning"),
    ],
)
def test_bad_index_settings_name_the_problem(env, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(env=env)


def test_credentials_are_secret_in_settings_and_revealed_only_to_the_adapter(tmp_path):
    """A key from the environment or the file is a SecretStr in the settings (no
    repr or dump shows it); the adapter's own model gets it, typed as it types it."""
    from pydantic import BaseModel, SecretStr

    class Options(BaseModel):  # an adapter typing one secret as SecretStr, one secret-looking name as str
        api_key: SecretStr
        password: SecretStr
        key_prefix: str

    path = write(tmp_path, '[llm]\nname = "x"\n[llm.options]\npassword = "hunter2-from-file"\n')
    loaded = load_settings(path, env={"RAGKIT_LLM__API_KEY": "sk-live", "RAGKIT_LLM__KEY_PREFIX": "p:"})
    options = loaded.settings.llm.options
    assert isinstance(options["api_key"], SecretStr) and isinstance(options["password"], SecretStr)
    for shown in (repr(loaded), str(loaded.settings), loaded.settings.model_dump_json(), str(loaded.masked())):
        assert "sk-live" not in shown and "hunter2-from-file" not in shown
    given = Options.model_validate(loaded.settings.llm.adapter_options())
    assert given.api_key.get_secret_value() == "sk-live" and given.password.get_secret_value() == "hunter2-from-file"
    assert given.key_prefix == "p:"
    assert "sk-live" not in repr(given)
    # A key from the file, which no environment variable holds, is scrubbed from error text too.
    assert redact("the server said: bad password hunter2-from-file") == "the server said: bad password ****"


def test_a_rejected_secret_option_is_named_not_shown():
    loaded = load_settings(env={"RAGKIT_EMBEDDER__API_KEY": "sk-live-123"})
    problem = validate_options(loaded.settings)["embedder"]
    assert problem and "api_key" in problem and "sk-live-123" not in problem


def test_nested_options_from_environment_keep_their_path_and_source():
    loaded = load_settings(env={"RAGKIT_VECTOR": "chroma", "RAGKIT_VECTOR__HEADERS__AUTHORIZATION": "Bearer t0k"})
    headers = loaded.settings.vector.options["headers"]
    assert headers["authorization"].get_secret_value() == "Bearer t0k"
    assert loaded.sources["vector.options.headers.authorization"] == "env (RAGKIT_VECTOR__HEADERS__AUTHORIZATION)"
    assert loaded.sources["vector.name"] == "env (RAGKIT_VECTOR)"


def test_file_backend_options_dropped_when_environment_names_another_backend(tmp_path):
    path = write(tmp_path, '[llm]\nname = "scripted"\n[llm.options]\ndefault = "hi"\n')
    loaded = load_settings(path, env={"RAGKIT_LLM": "offline"})
    assert (loaded.settings.llm.name, loaded.settings.llm.options) == ("offline", {})
    same = load_settings(path, env={"RAGKIT_LLM": "scripted"})
    assert same.settings.llm.options == {"default": "hi"}


def test_unrelated_ragkit_variables_are_not_settings():
    loaded = load_settings(env={"RAGKIT_CONFIG_X": "1", "RAGKIT_REDIS_URL": "redis://h", "RAGKIT_WORKSPACE__X": "y", "RAGKIT_INDEX": "5"})
    assert loaded.settings == load_settings(env={}).settings
