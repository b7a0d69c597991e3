"""Answer stage: the prompt that asks for an answer from the context only, with
citations by the context's reference numbers (``query/cited.py`` maps them back
to the sources and renumbers them), and the bypass prompt that asks the LLM alone.

The context goes into the system prompt; the conversation history (if any) and
then the question are the messages, so history reaches this call only.
"""

from __future__ import annotations

from pydantic import ValidationError

from ragkit.errors import InvalidValueError, describe_validation_error
from ragkit.protocols import ChatRequest
from ragkit.protocols.models import Message

ANSWER_SYSTEM = """You answer questions using only the context below: entities and relations from a knowledge graph, and the source chunks they were extracted from.

Rules:
- Use only facts stated in the context. If the context does not contain the answer, say so plainly; do not guess or use outside knowledge.
- Cite the source chunks you rely on with their reference numbers in square brackets, like [1] or [2][3], right after the claim they support. Entities and relations list the references of their sources in "refs".
- Cite only numbers from the context's references, and do not end with a list of references: the sources you cite are listed after your answer.
- Keep facts about different people, projects or organisations apart.
- Answer in {language}, formatted as: {response_type}.
{user_instructions}
---Context---

{context}"""

BYPASS_SYSTEM = "You are a helpful assistant. Answer in {language}, formatted as: {response_type}."


def build_answer_request(
    question: str,
    context: str,
    *,
    history: list[dict[str, str]],
    response_type: str,
    language: str,
    user_instructions: str = "",
) -> ChatRequest:
    extra = f"- {user_instructions.strip()}\n" if user_instructions.strip() else ""
    system = ANSWER_SYSTEM.format(
        language=language, response_type=response_type, user_instructions=extra, context=context
    )
    return ChatRequest(prompt=question, system=system, history=_messages(history), role="answer")


def build_bypass_request(
    question: str, *, history: list[dict[str, str]], response_type: str, language: str
) -> ChatRequest:
    system = BYPASS_SYSTEM.format(language=language, response_type=response_type)
    return ChatRequest(prompt=question, system=system, history=_messages(history), role="answer")


def _messages(history: list[dict[str, str]]) -> tuple[Message, ...]:
    try:
        return tuple(Message.model_validate(m) for m in history)
    except ValidationError as exc:
        raise InvalidValueError(
            f"history: {describe_validation_error(exc)}; give a list of "
            '{"role": "user" | "assistant" | "system", "content": "..."}'
        ) from None
