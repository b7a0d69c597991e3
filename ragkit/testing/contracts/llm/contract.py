"""``LLMContract``: what every ``LLM`` adapter must do (see
``ragkit.protocols.models.LLM``). The ``adapter`` fixture yields a ready model
instance (``cls(options)``); models have no lifecycle, so nothing needs
closing unless the adapter holds a client."""

from __future__ import annotations

import asyncio

from ragkit.protocols.base import Capability
from ragkit.protocols.models import LLM, ChatRequest, Completion, Message
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import ModelContractBase, contract, declared, needs
from ragkit.testing.contracts.base.models import WHITESPACE_PROMPT, check_capabilities, check_model_id
from ragkit.testing.contracts.llm.edge_cases import LLMEdgeCaseTests

REQUEST = ChatRequest(prompt="Name one renewable energy source in one word.", max_tokens=20, temperature=0)


class LLMIdentityTests:
    @checks("llm.model-id.stable")
    async def test_model_id_is_a_stable_str(self, adapter):
        """``model_id`` is a non-empty str, unchanged across reads, calls and a
        second instance built from the same options (it is part of cache keys).

        Troubleshoot: build model_id from provider, model name and the options
        that change outputs; never include object ids, times or secrets.
        """
        check_model_id(adapter)
        await adapter.complete(REQUEST)
        check_model_id(adapter)

    async def test_declares_capabilities(self, adapter):
        """``capabilities`` is a frozenset of ``Capability`` members (an
        LLM may declare STREAMING, JSON_MODE, DETERMINISTIC).

        Troubleshoot: ``capabilities = frozenset({Capability.STREAMING})`` on the class.
        """
        check_capabilities(adapter)
        assert isinstance(adapter, LLM)


class LLMCompleteTests:
    @checks("llm.complete.completion")
    async def test_complete_returns_a_completion(self, adapter):
        """``complete`` returns a ``Completion`` whose text is a str and whose
        usage counts are non-negative ints.

        Troubleshoot: wrap the provider response in ``Completion(text=..., usage=Usage(...))``.
        """
        out = await adapter.complete(REQUEST)
        assert isinstance(out, Completion), f"complete() returned {type(out).__name__}"
        assert isinstance(out.text, str)
        assert out.usage.input_tokens >= 0 and out.usage.output_tokens >= 0

    @checks("llm.complete.completion")
    async def test_complete_accepts_every_request_field(self, adapter):
        """A request with a system prompt, history, json_mode, max_tokens,
        temperature and a role is accepted (also CJK/emoji text).

        Troubleshoot: map ``ChatRequest.messages()`` to the provider's format;
        ignore json_mode if JSON_MODE is not declared rather than failing.
        """
        req = ChatRequest(
            prompt="继续 🙂: answer with {\"ok\": true}",
            system="You are terse.",
            history=(Message(role="user", content="hi"), Message(role="assistant", content="hello")),
            json_mode=Capability.JSON_MODE in declared(adapter),
            max_tokens=30,
            temperature=0.0,
            role="keywords",
        )
        out = await adapter.complete(req)
        assert isinstance(out, Completion) and isinstance(out.text, str)

    async def test_concurrent_calls(self, adapter):
        """Several ``complete`` calls awaited together all succeed (the pipeline
        runs LLM calls concurrently).

        Troubleshoot: do not share per-call state on the adapter; use a client
        that supports concurrent requests.
        """
        outs = await asyncio.gather(*(adapter.complete(REQUEST) for _ in range(4)))
        assert all(isinstance(o, Completion) for o in outs)

    @needs(Capability.DETERMINISTIC)
    async def test_same_request_same_text(self, adapter):
        """(DETERMINISTIC) The same request gives the same text every call.

        Troubleshoot: declare DETERMINISTIC only if outputs are reproducible
        (temperature 0 is usually not enough for hosted models).
        """
        first = await adapter.complete(REQUEST)
        second = await adapter.complete(REQUEST)
        assert first.text == second.text


class LLMStreamTests:
    @needs(Capability.STREAMING)
    async def test_stream_yields_str_pieces(self, adapter):
        """(STREAMING) ``stream`` is an async iterator of str pieces.

        Troubleshoot: ``stream`` is an ``async def`` generator yielding text deltas
        (skip empty/None deltas from the provider).
        """
        pieces = [p async for p in adapter.stream(REQUEST)]
        assert all(isinstance(p, str) for p in pieces), [type(p).__name__ for p in pieces]

    @needs(Capability.STREAMING)
    @checks("llm.stream.concatenates")
    async def test_stream_concatenates_to_complete_text(self, adapter):
        """(STREAMING) Joined, the streamed pieces equal ``complete``'s text for
        the same request (checked when DETERMINISTIC is declared too).

        Troubleshoot: do not drop the first/last delta or add separators.
        """
        streamed = "".join([p async for p in adapter.stream(REQUEST)])
        if Capability.DETERMINISTIC in declared(adapter):
            assert streamed == (await adapter.complete(REQUEST)).text
        else:
            assert isinstance(streamed, str)


class LLMStreamJoinTests:
    @needs(Capability.STREAMING)
    @checks("cross.llm.stream-concatenates", "llm.stream.concatenates")
    async def test_streams_join_to_the_full_answer(self, adapter):
        """(STREAMING) For several requests, the joined stream is ``complete``'s
        text (whenever ``complete`` answers twice the same: always for
        DETERMINISTIC models), and no piece is empty of meaning by being None.

        Troubleshoot: yield provider deltas unchanged, skip None, keep whitespace.
        """
        for prompt in (WHITESPACE_PROMPT, "one", "  leading and trailing  ", "line\n\nbreaks\n"):
            request = ChatRequest(prompt=prompt, temperature=0)
            a = (await adapter.complete(request)).text
            joined = "".join([p async for p in adapter.stream(request)])
            b = (await adapter.complete(request)).text
            if a == b:
                assert joined == a, f"stream joins to {joined!r}; complete gives {a!r}"
            else:
                assert Capability.DETERMINISTIC not in declared(adapter)


@contract("llm", LLM)
class LLMContract(LLMEdgeCaseTests, LLMStreamJoinTests, LLMStreamTests, LLMCompleteTests, LLMIdentityTests, ModelContractBase):
    """The LLM contract. Subclass it and override one fixture::

        class TestMyLLM(LLMContract):
            @pytest.fixture
            def adapter(self):
                return MyLLM({"model": "small"})
    """
