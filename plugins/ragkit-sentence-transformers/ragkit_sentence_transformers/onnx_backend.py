"""The ``onnx`` backend: the same bi-encoder run by ONNX Runtime instead of torch.

Why: a query embeds one or a few short texts, and torch spends most of such
a call in per-operator overhead. ONNX Runtime runs MiniLM on one question in
about a third of the time, with the same vectors (max abs difference ~1e-7).

What it runs:
- the model folder's own ``onnx/model.onnx`` when it ships one (the Hugging
  Face layout), else an export made once from the folder's weights with
  ``torch.onnx`` (needs the ``onnx`` package), kept in a cache folder and
  checked against torch on probe texts before it is used;
- the folder's ``tokenizer.json`` through the ``tokenizers`` library, padded
  to the longest text of a batch and truncated to ``max_seq_length``;
- pooling and normalisation as the folder's sentence-transformers modules say
  (Transformer, then Pooling with mean or CLS, then optionally Normalize).
  Any other layout is a ``ConfigError`` that says to use ``backend = "torch"``.

Nothing is downloaded: export works from the local weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.errors import ConfigError

OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
PROBES = ["Solar panels convert sunlight into electricity.", "a", "太阳能电池板 🌞 发电 " * 40]
EXPORT_TOLERANCE = 1e-4
INSTALL_HINT = "pip install 'ragkit-sentence-transformers[onnx]'"


@dataclass(frozen=True)
class Layout:
    """What the folder's sentence-transformers modules ask for."""

    pooling: str  # "mean" or "cls"
    normalize: bool
    max_seq_length: int
    dimension: int


def read_layout(folder: Path) -> Layout:
    """The folder's module list, or a ``ConfigError`` when this backend cannot run it."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _unsupported(folder, f"no readable modules.json ({exc})") from exc
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise _unsupported(folder, f"its modules are {kinds}")
    if modules[0].get("path", ""):
        raise _unsupported(folder, "its Transformer module is not at the folder's root")
    pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text(encoding="utf-8"))
    modes = [k.removeprefix("pooling_mode_") for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    mode = {"mean_tokens": "mean", "cls_token": "cls"}.get(modes[0]) if len(modes) == 1 else None
    if mode is None:
        raise _unsupported(folder, f"its pooling is {modes or 'unset'} (supported: mean_tokens or cls_token)")
    st_config = _json_or_empty(folder / "sentence_bert_config.json")
    return Layout(
        pooling=mode,
        normalize=kinds[-1] == "Normalize",
        max_seq_length=int(st_config.get("max_seq_length") or 512),
        dimension=int(pooling["word_embedding_dimension"]),
    )


def _unsupported(folder: Path, why: str) -> ConfigError:
    return ConfigError(
        f'backend = "onnx" cannot run the model at {folder}: {why}. It runs Transformer + Pooling '
        f'(mean or CLS) [+ Normalize] models; use backend = "torch" for this one'
    )


def _json_or_empty(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


class OnnxEncoder:
    """One loaded model: tokenizer, ONNX Runtime session and pooling."""

    def __init__(self, folder: Path, onnx_file: Path, layout: Layout) -> None:
        ort = _import("onnxruntime")
        from tokenizers import Tokenizer

        self.layout = layout
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        pad = _json_or_empty(folder / "tokenizer_config.json").get("pad_token") or "[PAD]"
        pad = pad if isinstance(pad, str) else pad.get("content", "[PAD]")  # str or an AddedToken dict
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id(pad) or 0, pad_token=pad)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # no warnings about unused initializers on stderr
        # Idle pool threads would spin-wait for the next run, taking a core from
        # the event loop that is building the rest of the query meanwhile.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        unknown = set(self.inputs) - set(INPUTS)
        if unknown:
            raise ConfigError(f"ONNX model {onnx_file} wants inputs {sorted(unknown)} this backend cannot give")
        outputs = [o.name for o in self.session.get_outputs()]
        self.output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]

    def encode(self, texts: list[str], batch_size: int, max_seq_length: int, normalize: bool) -> np.ndarray:
        """Vectors in the order of ``texts``; batches of similar length pad less."""
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        vectors = [self._batch([texts[i].strip() for i in picked], normalize) for picked in batches]
        # Sized by what the model made, not by the config: the caller compares the two.
        out = np.empty((len(texts), vectors[0].shape[1]), dtype=np.float32)
        for picked, batch in zip(batches, vectors, strict=True):
            out[picked] = batch
        return out

    def _batch(self, texts: list[str], normalize: bool) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        (hidden,) = self.session.run([self.output], {k: feeds[k] for k in self.inputs})
        if self.layout.pooling == "cls":
            vectors = hidden[:, 0]
        else:
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            vectors = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        if normalize or self.layout.normalize:
            vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors.astype(np.float32)


def load_encoder(folder: Path, cache_dir: Path | None) -> OnnxEncoder:
    """The folder's own ONNX model, or the cached export of its weights, made
    now if missing and made again if the cached file does not load."""
    _import("onnxruntime")  # before any export: the missing package is the first thing to say
    layout = read_layout(folder)
    shipped = folder / "onnx" / "model.onnx"
    if shipped.is_file():
        return OnnxEncoder(folder, shipped, layout)
    target = cached_export(folder, cache_dir)
    if target.is_file():
        try:
            return OnnxEncoder(folder, target, layout)
        except Exception:  # a damaged cache entry (disk full, copied half): export it again
            target.unlink()
    return export(folder, target)


def cached_export(folder: Path, cache_dir: Path | None) -> Path:
    """Where the export of this folder's weights is kept."""
    return (cache_dir or default_cache_dir()) / _export_key(folder) / "model.onnx"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ragkit" / "onnx"


def _export_key(folder: Path) -> str:
    """Changes with the weights (size and mtime), torch, transformers and the opset."""
    weights = [p for p in sorted(folder.iterdir()) if p.suffix in (".safetensors", ".bin") and p.is_file()]
    if not weights:
        raise ConfigError(f"no model weights (*.safetensors or *.bin) in {folder}: cannot export it to ONNX")
    parts = [str(folder.resolve()), f"opset={OPSET}"]
    parts += [f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in weights]
    parts += [f"{d}={_version(d)}" for d in ("torch", "transformers")]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def export(folder: Path, target: Path) -> OnnxEncoder:
    """Export the folder's transformer to ``target``, check it, then move it in place;
    returns the encoder the check loaded (its session does not read the file again).

    Written to a temporary file and renamed, so a crash or a second process
    exporting at the same time never leaves a half-written model behind."""
    _import("onnx")  # torch.onnx needs it; a clear error beats torch's
    import torch
    from transformers import AutoModel

    # Eager attention and a padded example: tracing records one path, and this
    # one holds the masking that padded batches need, whatever shortcut a
    # transformers version takes for unpadded ones. The check below verifies it.
    model = AutoModel.from_pretrained(str(folder), local_files_only=True, attn_implementation="eager").eval()
    wrapper = _hidden_states(model)
    ids = torch.full((2, 8), 1000, dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".export-", suffix=".onnx")
    os.close(fd)
    try:
        # The TorchScript exporter: deprecated in torch 2.9+ but still shipped, and it
        # needs only `onnx` (the torch.export one also wants onnxscript). Its
        # tracer warnings are about inputs unlike the example; the check below
        # runs real, padded batches through the result instead.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper, (ids, mask, torch.zeros_like(ids)), tmp,
                input_names=list(INPUTS), output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*INPUTS, "last_hidden_state"]},
                opset_version=OPSET, dynamo=False,
            )
        encoder = _check_export(folder, Path(tmp), wrapper)
        os.replace(tmp, target)
        return encoder
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _hidden_states(model: Any) -> Any:
    """``model(...).last_hidden_state`` as a module the exporter can trace."""
    import torch

    class HiddenStates(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    return HiddenStates().eval()  # export restores the mode it found: keep dropout off


def _check_export(folder: Path, file: Path, wrapper: Any) -> OnnxEncoder:
    """The exported graph must give torch's hidden states on real texts."""
    import torch

    encoder = OnnxEncoder(folder, file, read_layout(folder))
    encoder.tokenizer.enable_truncation(max_length=encoder.layout.max_seq_length)
    encodings = encoder.tokenizer.encode_batch(PROBES)
    feeds = [torch.tensor([getattr(e, a) for e in encodings]) for a in ("ids", "attention_mask", "type_ids")]
    with torch.no_grad():
        expected = wrapper(*feeds).numpy()
    named = dict(zip(INPUTS, (f.numpy() for f in feeds)))
    (got,) = encoder.session.run([encoder.output], {k: named[k] for k in encoder.inputs})
    mask = named["attention_mask"][..., None].astype(bool)  # padding positions mean nothing
    worst = float(np.abs(np.where(mask, got - expected, 0)).max())
    if worst > EXPORT_TOLERANCE:
        raise ConfigError(
            f"the ONNX export of {folder} differs from torch by {worst:.2e} (> {EXPORT_TOLERANCE}): "
            'use backend = "torch" for this model'
        )
    return encoder


def _import(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f'backend = "onnx" needs the {module!r} package ({exc}): {INSTALL_HINT}') from exc
