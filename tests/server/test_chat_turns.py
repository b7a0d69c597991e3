"""A chat request's messages as a ragkit query: mode by model name or by a
``/mode`` prefix, question, history, instructions, size limits (no server)."""

from __future__ import annotations

import pytest

from ragkit.query.modes import available_modes
from ragkit.schema import QueryParam
from ragkit.server.chat import ChatLimits
from ragkit.server.chat.errors import ChatError
from ragkit.server.chat.turns import mode_of_model, model_names, turns_of

LIMITS = ChatLimits(max_messages=5, max_message_chars=50, max_total_chars=120)


def test_one_model_per_available_mode():
    assert model_names() == [f"ragkit:{m.name}" for m in available_modes()]
    assert {"ragkit:mix", "ragkit:ppr", "ragkit:bypass"} <= set(model_names())


DEFAULT = QueryParam().mode


@pytest.mark.parametrize("model, mode", [("ragkit:local", "local"), ("ragkit", DEFAULT), ("ragkit:latest", DEFAULT)])
def test_model_names_pick_the_mode(model, mode):
    assert mode_of_model(model) == mode


@pytest.mark.parametrize("model", ["llama3", "ragkit:nope", "ragkit:", "other:mix"])
def test_unknown_model_is_a_404_naming_the_models(model):
    with pytest.raises(ChatError) as err:
        mode_of_model(model)
    assert err.value.status == 404 and err.value.param == "model"
    assert all(name in err.value.message for name in model_names())


def test_prefix_overrides_the_model_and_earlier_turns_become_history():
    turns = turns_of([
        ("system", "Answer briefly."),
        ("user", "/naive who is Gu Yao?"),
        ("assistant", "Gu Yao leads Haijia [1]."),
        ("tool", "ignored"),
        ("user", "/local  and who supplies it?"),
    ], "ragkit:mix", LIMITS)
    assert turns.mode == "local"
    assert turns.question == "and who supplies it?"
    assert turns.history == [{"role": "user", "content": "who is Gu Yao?"},
                             {"role": "assistant", "content": "Gu Yao leads Haijia [1]."}]
    assert turns.instructions == "Answer briefly."
    param = turns.param(stream=True)
    assert (param.mode, param.history, param.user_prompt, param.stream) == ("local", turns.history, "Answer briefly.", True)


def test_without_prefix_the_model_decides_and_slashes_elsewhere_are_text():
    turns = turns_of([("user", "what is in /etc/hosts?")], "ragkit:ppr", LIMITS)
    assert (turns.mode, turns.question) == ("ppr", "what is in /etc/hosts?")
    assert turns_of([("user", " /etc is a folder")], "ragkit", LIMITS).question == " /etc is a folder"


@pytest.mark.parametrize("messages, status, words", [
    ([("user", "/lokal who?")], 400, "unknown mode prefix '/lokal'"),
    ([("user", "/local   ")], 400, "the question is empty"),
    ([("user", "hi"), ("assistant", "hello")], 400, "last message must be the user's"),
    ([], 400, "last message must be the user's"),
    ([("user", "x")] * 6, 413, "max_messages=5"),
    ([("user", "x" * 51)], 413, "max_message_chars=50"),
    ([("user", "x" * 50), ("assistant", "y" * 50), ("user", "z" * 21)], 413, "max_total_chars=120"),
])
def test_bad_conversations_are_refused_with_the_fix(messages, status, words):
    with pytest.raises(ChatError) as err:
        turns_of(messages, "ragkit:mix", LIMITS)
    assert err.value.status == status and words in err.value.message
    if "prefix" in words:
        assert "/local" in err.value.message and "/ppr" in err.value.message
