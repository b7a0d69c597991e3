"""The test doubles' own promises, beyond the protocol each one implements
(its contract class checks that): the ``hash`` embedder's exact vectors, the
scripted LLM's script, and the overlap reranker's scores. Tests across the
project rely on these; the mutation targets for the doubles run them
(``tests/mutation/targets.toml``).
"""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from ragkit.protocols.models import ChatRequest
from ragkit.testing.doubles import HashEmbedder, OverlapReranker, ScriptedLLM, words

# -- the hash embedder -------------------------------------------------------------


async def test_hash_vectors_are_exactly_the_published_ones():
    """A workspace embedded with ``hash-8`` holds these rows, and every run must
    reproduce them: the model id promises it ([embedder.model-id.identifies-outputs]),
    so a change to the hashing needs a new model id, not a silent new vector."""
    embedder = HashEmbedder({"dimension": 8})
    assert embedder.model_id == "hash-8" and embedder.dimension == 8
    rows = await embedder.embed(["Solar panels, solar power", "太阳能", "a一 b\u9fff", " \n "])
    expected = np.array([
        [0.3162277638912201, 0.0, -0.9486832618713379, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.5773502588272095, 0.0, 0.0, 0.5773502588272095, 0.0, 0.5773502588272095],
        [-0.5, -0.5, 0.0, 0.0, 0.0, -0.5, -0.5, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],  # no words: the feature of ""
    ], dtype=np.float32)
    assert rows.dtype == np.float32
    assert np.array_equal(rows, expected), rows.tolist()


async def test_a_text_whose_words_cancel_out_still_gets_a_unit_vector():
    """"w0" and "w6" fall in the same bucket of 64 with opposite signs: the row
    sums to zero, and the text gets one feature of its own instead (vector
    stores reject zero vectors)."""
    row = (await HashEmbedder({"dimension": 64}).embed(["w0 w6"]))[0]
    assert np.flatnonzero(row).tolist() == [48] and row[48] == 1.0


def test_chinese_characters_are_features_of_their_own_at_both_ends_of_the_range():
    """CJK runs are split into characters, the range's first (U+4E00) and last
    (U+9FFF) included, even inside a word with Latin letters."""
    assert words("Tea 一杯") == ["tea", "一", "杯"]
    assert words("x\u4e00y") == ["x", "\u4e00", "y"]
    assert words("x\u9fffy") == ["x", "\u9fff", "y"]
    assert words("x\u3400y \ua000") == ["x\u3400y", "\ua000"]  # letters outside the range: one word


async def test_the_embedder_counts_its_calls():
    embedder = HashEmbedder()
    assert embedder.calls == 0 and embedder.dimension == 64 and embedder.max_batch_size == 64
    await embedder.embed(["one"])
    await embedder.embed([])
    assert embedder.calls == 2


# -- the scripted LLM ------------------------------------------------------------------


async def test_a_dict_script_answers_by_the_first_key_the_prompt_contains():
    llm = ScriptedLLM({"responses": {"capital": "Paris", "river": "Seine"}, "default": "no idea"})
    assert (await llm.complete(ChatRequest(prompt="The river through the capital?"))).text == "Paris"
    assert (await llm.complete(ChatRequest(prompt="Which river?"))).text == "Seine"
    assert (await llm.complete(ChatRequest(prompt="Anything else"))).text == "no idea"
    assert [r.prompt for r in llm.requests] == ["The river through the capital?", "Which river?", "Anything else"]


async def test_a_list_script_is_consumed_in_order_then_says_it_ran_out():
    llm = ScriptedLLM(script=["first", "second"])
    assert [(await llm.complete(ChatRequest(prompt=p))).text for p in ("a", "b")] == ["first", "second"]
    with pytest.raises(AssertionError, match="^ScriptedLLM ran out of scripted responses$"):
        await llm.complete(ChatRequest(prompt="c"))
    assert len(llm.requests) == 3


async def test_a_function_script_gets_the_request_and_usage_counts_words():
    llm = ScriptedLLM(script=lambda request: request.prompt.upper() + " done")
    done = await llm.complete(ChatRequest(prompt="three small words"))
    assert done.text == "THREE SMALL WORDS done"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (3, 4)
    assert [p async for p in llm.stream(ChatRequest(prompt="ab"))] == ["AB done"]


async def test_the_default_answer_and_latency_come_from_the_options():
    llm = ScriptedLLM({"default": "fallback", "latency": 0.05, "chunk_size": 3})
    started = time.monotonic()
    assert (await llm.complete(ChatRequest(prompt="x"))).text == "fallback"
    assert time.monotonic() - started >= 0.05
    assert [p async for p in llm.stream(ChatRequest(prompt="x"))] == ["fal", "lba", "ck"]


def test_the_model_id_follows_the_responses_and_the_default():
    base = ScriptedLLM({"responses": {"a": "1"}})
    assert ScriptedLLM({"responses": {"a": "1"}}).model_id == base.model_id
    assert ScriptedLLM({"responses": {"a": "2"}}).model_id != base.model_id
    assert ScriptedLLM({"responses": {"b": "1"}}).model_id != base.model_id
    assert ScriptedLLM({"responses": {"a": "1"}, "default": "KO"}).model_id != base.model_id


# -- the overlap reranker ---------------------------------------------------------------


async def test_overlap_scores_are_the_share_of_the_query_words_found():
    reranker = OverlapReranker()
    scores = await reranker.scores("solar wind power", ["solar power plant", "wind", "coal"])
    assert scores == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert await reranker.scores("   ", ["solar", "wind"]) == [0.0, 0.0]  # a query with no words matches nothing


def test_doubles_need_no_event_loop_to_be_built():
    """Sync fixtures across the suite build them: in a thread that never had
    an event loop, each is built, then answers in a loop started afterwards."""
    out: dict[str, object] = {}

    def build_then_use() -> None:
        try:
            asyncio.get_running_loop()
            out["loop"] = True
        except RuntimeError:
            pass
        llm, embedder, reranker = ScriptedLLM(script=lambda r: "ok"), HashEmbedder({"dimension": 8}), OverlapReranker()

        async def use() -> None:
            out["llm"] = (await llm.complete(ChatRequest(prompt="hi"))).text
            out["dim"] = len((await embedder.embed(["a"]))[0])
            out["scores"] = await reranker.scores("a b", ["a", "c"])

        asyncio.run(use())

    thread = threading.Thread(target=build_then_use)
    thread.start()
    thread.join(30)
    assert out == {"llm": "ok", "dim": 8, "scores": [0.5, 0.0]}
