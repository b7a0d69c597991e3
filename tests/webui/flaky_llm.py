"""The offline LLM that fails every call about a text holding ``FAILME``
while the file named by ``RAGKIT_TEST_FAIL_FLAG`` exists: a document that
fails, then succeeds on retry once the flag is gone."""

from __future__ import annotations

import os

from ragkit.offline.llm import OfflineLLM


class FlakyOfflineLLM(OfflineLLM):
    name = "flaky-offline"

    async def complete(self, request):
        if "FAILME" in request.prompt and os.path.exists(os.environ["RAGKIT_TEST_FAIL_FLAG"]):
            raise RuntimeError("the test model refuses this text while the flag file exists")
        return await super().complete(request)
