"""The loop that serves readers keeps turning while the writer merges a large batch.

``RAG`` runs its writer and its readers on one home loop (so does ``ragkit
serve``, on the loop that answers every request). Here a model answers each
extraction within a millisecond (awaiting, as a remote one does) with many rows over a small set of names, so that indexing
is mostly the writer's own work: merging tens of thousands of rows into a few
hundred hub entities and relations, encoding and writing them. A ticker on the
home loop (every 10 ms) records how long the loop went without a turn, and
queries are answered meanwhile.

What is asserted is behaviour, not speed: the longest gap is a small part of
the time the writer worked (``GAP_SHARE``), so the loop was never held for the
merge as a whole, whatever the machine's load; and the queries made while it
wrote were answered. On the code before the writer's work was paced
(``ragkit.core.pacing``), the graph update held the loop in one go: the
longest gap was 19% of the insert (3.4 s of 17.9 s; after: 0.65 s of 23.5 s,
3%, with three times as many reads answered meanwhile).

Troubleshooting: a failure prints the gaps and where the writer's time went;
a new long stretch of CPU work in the write path needs ``await pace()`` in its
loop, or a worker thread for one pure call.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

from ragkit.core.prompts import COMPLETE_MARKER, chunk_text_of, render_rows
from ragkit.rag import RAG
from ragkit.schema import Document, Entity, Relation
from ragkit.sections.index import IndexConfig
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.doubles import ScriptedLLM

NAMES = [f"Hub {i:03d}" for i in range(300)]
ROWS = 80
"""Entity rows (and as many relations) per chunk."""
GAP_SHARE = 0.1
"""The longest gap may be at most this part of the insert."""


def dense_extraction(request) -> str:
    """Many rows per chunk, over few names: every chunk adds a line to hub
    entities and relations, which each merge recomputes from all of them."""
    chunk = chunk_text_of(request.prompt)
    if chunk is None:  # gleaning, keywords, summaries, answers
        return COMPLETE_MARKER if request.history else "An answer."
    seed = int(hashlib.sha256(chunk.encode()).hexdigest()[:8], 16)
    picked = [NAMES[(seed + i * 7) % len(NAMES)] for i in range(ROWS)]
    words = chunk.split()[:12]
    ents = [Entity(name=n, type="organization", description=f"{n} appears with {' '.join(words)}") for n in picked]
    rels = [
        Relation(source=a, target=b, keywords="link", description=f"{a} and {b} in {' '.join(words[:6])}", strength=1.0)
        for a, b in zip(picked, picked[1:] + picked[:1])
    ]
    return render_rows(ents, rels)


def documents(n: int, words_per_doc: int) -> list[Document]:
    return [
        Document.from_text(" ".join(f"word{(d * 7919 + i) % 5003} topic{d}" for i in range(words_per_doc)))
        for d in range(n)
    ]


class Ticker:
    """Every ``tick`` seconds on the running loop; ``gaps``: how late each turn came."""

    def __init__(self, tick: float = 0.01) -> None:
        self.tick = tick
        self.gaps: list[float] = []

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.tick)
            self.gaps.append(loop.time() - before - self.tick)


async def test_the_home_loop_turns_while_the_writer_merges(tmp_path):
    rag = RAG(
        Settings(working_dir=tmp_path),
        llm=ScriptedLLM({"latency": 0.001}, script=dense_extraction),  # awaits, as a remote model does
        embedder=HashEmbedder({"dimension": 32}),
        index=IndexConfig(chunk_size=64, chunk_overlap=0),
    )
    async with rag:
        ticker = Ticker()
        ticking = asyncio.create_task(ticker.run())
        answered = 0

        async def read_meanwhile(done: asyncio.Event) -> None:
            nonlocal answered
            while not done.is_set():
                await rag.astatus()
                await rag.asearch_entities("Hub 00", limit=5)
                answered += 1
                await asyncio.sleep(0.05)

        done = asyncio.Event()
        reader = asyncio.create_task(read_meanwhile(done))
        started = time.perf_counter()
        _, report = await rag.ainsert(documents=documents(3, 1000))
        took = time.perf_counter() - started
        done.set()
        await reader
        ticking.cancel()

    assert len(report.processed) == 3 and not report.failed
    assert report.chunks > 100, report.chunks  # a large batch: the merge is long
    longest = max(ticker.gaps)
    print(f"insert {took:.2f} s, {report.chunks} chunks, longest gap {longest:.3f} s, {answered} reads")
    worst = sorted(ticker.gaps)[-5:]
    assert longest <= GAP_SHARE * took, (
        f"the home loop was held {longest:.2f} s of a {took:.2f} s insert (longest gaps: "
        f"{[round(g, 3) for g in worst]}): the writer's work must give the loop back between slices"
    )
    # Readers were answered all along, not only before and after the merge.
    assert answered >= 3, answered
