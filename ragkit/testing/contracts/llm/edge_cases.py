"""LLM tests of the rules models break most: ``model_id`` changes whenever
outputs would, several different calls in flight at once, streams of many
pieces with whitespace. Each names the rules it checks."""

from __future__ import annotations

import asyncio

from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import declared, needs
from ragkit.testing.contracts.base.models import (
    DISTINCT_PROMPTS,
    WHITESPACE_PROMPT,
    check_model_id_identifies_outputs,
)


class LLMEdgeCaseTests:
    @checks("llm.model-id.identifies-outputs")
    async def test_model_id_changes_when_outputs_do(self, adapter):
        """Instances whose options differ in one numeric or boolean field and
        answer the same request differently (each consistently) have different
        ``model_id``s.

        Troubleshoot: ``model_identity(provider, model, **output_options)``.
        """
        request = ChatRequest(prompt="Name one renewable energy source.", max_tokens=20, temperature=0)
        await check_model_id_identifies_outputs(
            adapter, lambda m: m.complete(request), lambda a, b: a.text == b.text
        )

    @checks("llm.concurrent.distinct")
    async def test_different_concurrent_requests_get_their_own_answers(self, adapter):
        """Six *different* requests awaited together each get the answer that
        request gets alone (checked for every request whose answer is stable
        across two calls alone: always for DETERMINISTIC models).

        Troubleshoot: no per-call state on the adapter (the last request, a
        shared buffer); match responses to requests by their own call.
        """
        requests = [ChatRequest(prompt=p, max_tokens=30, temperature=0) for p in DISTINCT_PROMPTS]
        alone = [[(await adapter.complete(r)).text for r in requests] for _ in range(2)]
        together = [c.text for c in await asyncio.gather(*(adapter.complete(r) for r in requests))]
        for r, a, b, got in zip(requests, alone[0], alone[1], together):
            if a == b:
                assert got == a, f"{r.prompt!r} alone gives {a!r}, awaited with others {got!r}"
            else:
                assert Capability.DETERMINISTIC not in declared(adapter), f"DETERMINISTIC but {a!r} != {b!r}"

    @needs(Capability.STREAMING)
    @checks("llm.stream.concatenates")
    async def test_stream_of_many_pieces_keeps_whitespace(self, adapter):
        """(STREAMING) For an answer of many pieces separated by runs of
        whitespace, the joined stream equals ``complete``'s text (whenever
        ``complete`` gives that text twice in a row: always for DETERMINISTIC
        models).

        Troubleshoot: yield each delta as it is (no ``strip()``, no separator
        between pieces, the first and last included).
        """
        request = ChatRequest(prompt=WHITESPACE_PROMPT, temperature=0)
        first = (await adapter.complete(request)).text
        pieces = [p async for p in adapter.stream(request)]
        second = (await adapter.complete(request)).text
        assert all(isinstance(p, str) for p in pieces)
        if first == second:
            assert "".join(pieces) == first, (
                f"stream of {len(pieces)} pieces joins to {''.join(pieces)!r}; complete gives {first!r}"
            )
