"""From a chat request to a ragkit query: the mode, the question, the history.

- The model name picks the mode: ``ragkit:<mode>`` for every available mode
  (``ragkit`` and ``ragkit:latest`` mean the default mode).
- A ``/<mode>`` prefix on the last user message overrides it, as in LightRAG
  Server (``/local who leads Haijia?``); an unknown ``/word`` prefix is a 400
  that lists the modes, so a typo never silently runs another mode (a
  message that must start with ``/`` can start with a space instead).
- The last message must be the user's: it is the question. Earlier user and
  assistant turns become ``QueryParam.history`` (given to the answer call);
  system messages become the answer's extra instructions (``user_prompt``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragkit.query.modes import available_modes
from ragkit.schema import QueryParam
from ragkit.server.chat.context import ChatLimits
from ragkit.server.chat.errors import ChatError

MODEL_FAMILY = "ragkit"
_PREFIX = re.compile(r"^/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?=\s|$)\s*")


def mode_names() -> list[str]:
    return [m.name for m in available_modes()]


def model_names() -> list[str]:
    """The models a client may pick: one per available mode."""
    return [f"{MODEL_FAMILY}:{name}" for name in mode_names()]


def mode_of_model(model: str) -> str:
    """The mode a model name stands for; unknown: a 404 naming the available models."""
    default = QueryParam.model_fields["mode"].default
    if model in (MODEL_FAMILY, f"{MODEL_FAMILY}:latest"):
        return default
    family, _, mode = model.partition(":")
    if family == MODEL_FAMILY and mode in mode_names():
        return mode
    raise ChatError(404, f"model {model!r} not found; available models: {', '.join(model_names())}",
                    param="model", code="model_not_found")


@dataclass
class Turns:
    """A conversation as ragkit queries it."""

    question: str
    mode: str
    history: list[dict[str, str]] = field(default_factory=list)
    instructions: str = ""

    def param(self, stream: bool) -> QueryParam:
        return QueryParam(mode=self.mode, history=self.history, user_prompt=self.instructions, stream=stream)


def split_prefix(text: str) -> tuple[str | None, str]:
    """``("local", "who...")`` for ``"/local who..."``; ``(None, text)`` without a prefix."""
    match = _PREFIX.match(text)
    if match is None:
        return None, text
    mode = match.group(1)
    if mode not in mode_names():
        modes = ", ".join(f"/{m}" for m in mode_names())
        raise ChatError(400, f"unknown mode prefix '/{mode}': start the message with one of {modes}, "
                             f"or with no '/' prefix to use the model's mode", param="messages", code="unknown_mode")
    return mode, text[match.end():]


def turns_of(messages: list[tuple[str, str]], model: str, limits: ChatLimits) -> Turns:
    """``messages`` as (role, text) pairs, oldest first."""
    mode = mode_of_model(model)
    check_sizes([text for _, text in messages], limits)
    if not messages or messages[-1][0] != "user":
        raise ChatError(400, "the last message must be the user's question (role 'user')",
                        param="messages", code="invalid_value")
    prefix, question = split_prefix(messages[-1][1])
    if not question.strip():
        raise ChatError(400, "the question is empty: write something after the mode prefix",
                        param="messages", code="invalid_value")
    history = [{"role": role, "content": _unprefixed(text) if role == "user" else text}
               for role, text in messages[:-1] if role in ("user", "assistant")]
    instructions = "\n".join(text.strip() for role, text in messages if role == "system" and text.strip())
    return Turns(question=question, mode=prefix or mode, history=history, instructions=instructions)


def _unprefixed(text: str) -> str:
    match = _PREFIX.match(text)
    return text[match.end():] if match and match.group(1) in mode_names() else text


def check_sizes(texts: list[str], limits: ChatLimits) -> None:
    if len(texts) > limits.max_messages:
        raise ChatError(413, f"{len(texts)} messages is more than max_messages={limits.max_messages}: "
                             f"send fewer earlier turns", param="messages", code="too_many_messages")
    longest = max((len(t) for t in texts), default=0)
    if longest > limits.max_message_chars:
        raise ChatError(413, f"a message of {longest} characters is longer than max_message_chars="
                             f"{limits.max_message_chars}: shorten it", param="messages", code="message_too_long")
    total = sum(len(t) for t in texts)
    if total > limits.max_total_chars:
        raise ChatError(413, f"the conversation's {total} characters are more than max_total_chars="
                             f"{limits.max_total_chars}: send fewer or shorter earlier turns",
                        param="messages", code="conversation_too_long")
