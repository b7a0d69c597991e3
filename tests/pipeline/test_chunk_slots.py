"""A run starts its chunks' extractions behind a bounded number of slots.

Each chunk's extraction does a little work (its prompt, its cache key) before
its first wait; without slots, every chunk of every document in flight did it
in one turn of the loop (1.3 s at 32 documents of 200 chunks), and a server's
requests waited that long. Troubleshooting: a count near the run's chunk total
means ``Indexer._extract_chunk`` no longer waits for ``_chunk_slots`` first.
"""

from __future__ import annotations

import asyncio

from ragkit.offline import OfflineLLM
from ragkit.pipeline.index import CHUNK_SLOTS_PER_CALL, IndexConfig
from ragkit.protocols.models import Completion, Usage
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import load_musique

CONCURRENCY = 2


class GatedRules:
    """The offline rules, answering only once ``gate`` is set."""

    def __init__(self) -> None:
        self.rules = OfflineLLM()
        self.model_id, self.capabilities = self.rules.model_id, self.rules.capabilities
        self.gate, self.asked = asyncio.Event(), asyncio.Event()

    async def complete(self, request):
        self.asked.set()
        await self.gate.wait()
        return Completion(text=self.rules.respond(request), usage=Usage(input_tokens=0, output_tokens=0))

    async def stream(self, request):
        yield (await self.complete(request)).text


def awaiting(task: asyncio.Task) -> list[str]:
    """The names of the coroutines in a task's chain of awaits."""
    names, coro = [], task.get_coro()
    while coro is not None and hasattr(coro, "cr_code"):
        names.append(coro.cr_code.co_name)
        coro = coro.cr_await
    return names


def in_extraction() -> int:
    """Tasks whose await chain is inside ``extract_chunk``: chunks started."""
    return sum("extract_chunk" in awaiting(task) for task in asyncio.all_tasks())


async def test_chunks_start_behind_slots(tmp_path):
    passages = [f"{p['title']}\n{p['text']}\n\n" for p in load_musique()[0][:120]]
    docs = [Document.from_text("".join(passages[i::3])) for i in range(3)]
    llm = GatedRules()
    rag = RAG(Settings(working_dir=tmp_path), llm=llm, embedder=HashEmbedder({"dimension": 16}),
              index=IndexConfig(llm_concurrency=CONCURRENCY, chunk_size=100, chunk_overlap=10))
    async with rag:
        run = asyncio.create_task(rag.ainsert(documents=docs))
        await asyncio.wait_for(llm.asked.wait(), 60)
        for _ in range(20):  # every chunk that may start gets the turns to do it
            await asyncio.sleep(0.01)
        started = in_extraction()
        llm.gate.set()
        _, report = await asyncio.wait_for(run, 300)
    assert report.chunks > 4 * CHUNK_SLOTS_PER_CALL * CONCURRENCY, "too few chunks to tell"
    assert 0 < started <= CHUNK_SLOTS_PER_CALL * CONCURRENCY, (started, report.chunks)
    assert len(report.processed) == 3 and not report.failed
