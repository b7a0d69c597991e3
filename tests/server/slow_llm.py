"""The offline LLM with a sleep before each call, for the server tests: an
ingestion slow enough to be interrupted (``RAGKIT_LLM=slow_llm:SlowOfflineLLM``,
with this folder on ``PYTHONPATH``), and a credential option to prove it never
leaks (``RAGKIT_LLM__API_KEY``)."""

from __future__ import annotations

import asyncio

from pydantic import Field, SecretStr

from ragkit.offline.llm import OfflineLLM, OfflineOptions


class SlowOptions(OfflineOptions):
    delay: float = Field(default=0.0, ge=0)
    api_key: SecretStr | None = None


class SlowOfflineLLM(OfflineLLM):
    name = "slow-offline"
    Options = SlowOptions

    async def complete(self, request):
        await asyncio.sleep(self.options.delay)
        return await super().complete(request)
