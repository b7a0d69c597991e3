"""The ``cross-encoder`` reranker through the real ``sentence_transformers.CrossEncoder``,
on the tiny cross-encoder built locally (``ragkit_sentence_transformers.testing``):
its score grows with the share of tokens the query and the document have in common."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ragkit.errors import ConfigError
from ragkit.plugins import get_registry
from ragkit.protocols import Reranker
from ragkit_sentence_transformers import CrossEncoderReranker

QUERY = "which river flows through vienna"
DOCS = [
    "Bananas are rich in potassium.",
    "The Danube is the river that flows through Vienna and Budapest.",
    "Vienna is the capital of Austria.",
    "Chess is played on a board of 64 squares.",
]


def test_registered_under_its_name():
    assert get_registry().get("reranker", "cross-encoder") is CrossEncoderReranker


async def test_scores_follow_the_documents_and_rank_the_answer_first(tiny_ce):
    reranker = CrossEncoderReranker({"model": str(tiny_ce)})
    assert isinstance(reranker, Reranker)
    scores = await reranker.scores(QUERY, DOCS)
    assert len(scores) == len(DOCS) and all(isinstance(s, float) for s in scores)
    assert scores[1] > scores[2] > max(scores[0], scores[3]), scores
    assert np.allclose((await reranker.scores(QUERY, DOCS[::-1]))[::-1], scores, atol=1e-6)


async def test_batch_size_and_batching_do_not_change_scores(tiny_ce):
    together = await CrossEncoderReranker({"model": str(tiny_ce)}).scores(QUERY, DOCS)
    small = await CrossEncoderReranker({"model": str(tiny_ce), "batch_size": 1}).scores(QUERY, DOCS)
    alone = [(await CrossEncoderReranker({"model": str(tiny_ce)}).scores(QUERY, [d]))[0] for d in DOCS]
    assert np.allclose(together, small, atol=1e-5) and np.allclose(together, alone, atol=1e-5)


async def test_concurrent_calls_share_one_model_safely(tiny_ce):
    reranker = CrossEncoderReranker({"model": str(tiny_ce)})
    expected = await reranker.scores(QUERY, DOCS)
    results = await asyncio.gather(*(reranker.scores(QUERY, DOCS) for _ in range(8)))
    assert all(r == expected for r in results)
    assert CrossEncoderReranker({"model": str(tiny_ce)}).loaded_model() is reranker.loaded_model()


async def test_max_length_truncates_each_pair(tiny_ce):
    """Past max_length tokens a document's words no longer count."""
    filler = "one two three four five six seven eight nine ten"
    docs = [filler, filler + " danube vienna river flows"]
    full = await CrossEncoderReranker({"model": str(tiny_ce)}).scores(QUERY, docs)
    cut_adapter = CrossEncoderReranker({"model": str(tiny_ce), "max_length": 12})
    cut = await cut_adapter.scores(QUERY, docs)
    assert full[1] > full[0] + 0.1
    assert cut[0] == pytest.approx(cut[1], abs=1e-6)
    assert cut_adapter.model_id == f"cross-encoder:{tiny_ce.resolve()}:max_length=12"


def test_model_is_required_and_options_are_checked():
    with pytest.raises(ConfigError, match="model"):
        CrossEncoderReranker({})
    with pytest.raises(ConfigError, match="batch_size"):
        CrossEncoderReranker({"model": "x", "batch_size": 0})


async def test_a_classifier_with_several_labels_is_refused(tmp_path, tiny_ce):
    """An NLI-style model (3 labels) gives no single relevance score."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=4, num_labels=3)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "nli")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "nli" / name).write_bytes((tiny_ce / name).read_bytes())
    reranker = CrossEncoderReranker({"model": str(tmp_path / "nli")})
    with pytest.raises(ConfigError, match=r"3 output labels; a reranker needs a model with one relevance score "
                                          r"per pair \(num_labels=1\)"):
        await reranker.scores("q", ["d"])


async def test_max_length_is_set_per_call_and_the_model_id_says_it(tiny_ce):
    """Adapters sharing one loaded model each score with their own
    ``max_length``, whichever ran last; the default adapter's model id has no
    suffix."""
    filler = "one two three four five six seven eight nine ten"
    docs = [filler, filler + " danube vienna river flows"]
    plain = CrossEncoderReranker({"model": str(tiny_ce)})
    cut = CrossEncoderReranker({"model": str(tiny_ce), "max_length": 12})
    first = await plain.scores(QUERY, docs)
    await cut.scores(QUERY, docs)
    assert await plain.scores(QUERY, docs) == first and first[1] > first[0] + 0.1
    assert plain.model_id == f"cross-encoder:{tiny_ce.resolve()}"


async def test_no_documents_no_scores_and_a_failing_call_is_a_model_error(tiny_ce):
    from ragkit.errors import ModelError

    reranker = CrossEncoderReranker({"model": str(tiny_ce)})
    assert await reranker.scores(QUERY, []) == []
    with pytest.raises(ModelError, match=rf"cross-encoder model '{tiny_ce.resolve()}' failed to score 2 documents: ValueError: "):
        await reranker.scores(QUERY, ["fine", None])  # type: ignore[list-item]


async def test_batch_size_sets_the_pairs_per_forward_pass_and_no_progress_bar_shows(tiny_ce, capfd):
    """Four documents with ``batch_size=1`` take four forward passes, with the
    default one; and no progress bar reaches stderr even with
    sentence-transformers' logger at INFO (a server's log would fill with one
    per query)."""
    import logging

    reranker = CrossEncoderReranker({"model": str(tiny_ce), "batch_size": 1})
    model = reranker.loaded_model()
    passes: list[int] = []
    hook = model.register_forward_pre_hook(lambda module, args: passes.append(1))
    logger = logging.getLogger("sentence_transformers")
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        capfd.readouterr()
        await reranker.scores(QUERY, DOCS)
        one_by_one = len(passes)
        await CrossEncoderReranker({"model": str(tiny_ce)}).scores(QUERY, DOCS)
        err = capfd.readouterr().err
    finally:
        logger.setLevel(level)
        hook.remove()
    assert (one_by_one, len(passes) - one_by_one) == (4, 1)
    assert "Batches" not in err and "%|" not in err, err


async def test_a_model_that_is_not_here_and_a_wrong_device_are_config_errors_naming_them(tiny_ce):
    missing = CrossEncoderReranker({"model": "someorg/no-such-model"})
    with pytest.raises(ConfigError, match=r"^CrossEncoder model 'someorg/no-such-model' is not available locally"):
        await missing.scores(QUERY, DOCS)
    wrong_device = CrossEncoderReranker({"model": str(tiny_ce), "device": "no-such-device"})
    with pytest.raises(ConfigError, match="on device 'no-such-device'"):
        await wrong_device.scores(QUERY, DOCS)


def test_the_token_limit_is_set_under_the_name_the_installed_library_uses(tiny_ce):
    """sentence-transformers 6 calls it ``max_seq_length`` (``max_length`` warns
    at each use, which a server would log per query); 5.x calls it ``max_length``."""
    import warnings

    from sentence_transformers import CrossEncoder

    from ragkit_sentence_transformers._loading import forget_models
    from ragkit_sentence_transformers.reranker import max_length_attr

    assert max_length_attr(CrossEncoder) == "max_seq_length"
    assert max_length_attr(type("CrossEncoder5", (), {"max_length": 512})) == "max_length"
    forget_models()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # in this thread: the model loads and scores here
        scores = CrossEncoderReranker({"model": str(tiny_ce), "max_length": 12})._predict([(QUERY, DOCS[1])])
    assert len(scores) == 1
