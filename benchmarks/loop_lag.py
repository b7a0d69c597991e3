"""Event-loop lag while a folder of large documents is indexed (issue 26).

    python benchmarks/loop_lag.py [--docs 50] [--chunks 200] [--chunk-size 200]
                                  [--llm process|offline] [--seconds 3600] [--label after]

A ``RAG`` (embedded default stores, hash embedder) indexes ``--docs``
documents of ``--chunks`` chunks each (``--chunk-size`` tokens per chunk):
MuSiQue passages (title and text), shuffled with a seed per document and
concatenated until the document has that many chunks. A 10 ms ticker on the
RAG's home loop, the loop a server answers its requests on, records how late
each of its turns came (``LoopLag`` of ``benchmarks/index_latency.py``): the
longest wait a request would have had behind the writer's work.

The model: ``process`` (default) runs the offline rules in a worker process,
so that the lag is the writer's own work, as with a remote model whose work
happens elsewhere and which the loop only awaits; ``offline`` is the
``offline`` adapter as the checkout has it (before issue 26 it computed on the
loop). A separate process runs the same ticker and nothing else
(``noise_floor_lag``): on a shared machine the scheduler alone delays a
loop, and the run's figures are read against that floor. ``--seconds`` bounds the run: cut short, the figures cover the part
indexed (``complete: false``).

For a "before" figure, run the script with another checkout first on the
path: ``PYTHONPATH=/tmp/base python benchmarks/loop_lag.py --label before``.
Results are merged into ``benchmarks/results/loop_lag.json`` under
``<label>/<docs>x<chunks>``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from index_latency import LoopLag  # noqa: E402
from loop_watchdog import LoopWatchdog  # noqa: E402

OUT = HERE / "results" / "loop_lag.json"

_RULES: Any = None


def _respond(request: Any) -> str:
    """In the worker process: the offline rules' answer."""
    global _RULES
    if _RULES is None:
        from ragkit.offline import OfflineLLM

        _RULES = OfflineLLM()
    return _RULES.respond(request)


class ProcessRules:
    """The offline rules in one worker process: the model's work happens
    elsewhere, as a remote model's does; the loop only awaits it."""

    def __init__(self) -> None:
        from ragkit.offline import OfflineLLM

        inner = OfflineLLM()
        self.model_id, self.capabilities = inner.model_id, inner.capabilities
        self.pool = ProcessPoolExecutor(1)

    async def complete(self, request: Any) -> Any:
        from ragkit.protocols.models import Completion, Usage

        text = await asyncio.get_running_loop().run_in_executor(self.pool, _respond, request)
        return Completion(text=text, usage=Usage(input_tokens=0, output_tokens=0))

    async def stream(self, request: Any):
        yield (await self.complete(request)).text


def build_documents(docs: int, chunks: int, chunk_size: int, overlap: int) -> list[Any]:
    """``docs`` documents of about ``chunks`` chunks each, from shuffled passages."""
    from ragkit.schema import Document
    from ragkit.testing.replay import load_musique
    from ragkit.tokenizer import TiktokenTokenizer

    tokenizer = TiktokenTokenizer()
    passages = [(f"{p['title']}\n{p['text']}\n\n", tokenizer.count(f"{p['title']}\n{p['text']}\n\n"))
                for p in load_musique()[0]]
    target = chunks * (chunk_size - overlap)
    out = []
    for d in range(docs):
        order = list(range(len(passages)))
        random.Random(d).shuffle(order)
        parts, tokens = [], 0
        for i in order * 4:  # a corpus smaller than a document repeats
            parts.append(passages[i][0])
            tokens += passages[i][1]
            if tokens >= target:
                break
        out.append(Document.from_text("".join(parts)))
    return out


async def index(args: argparse.Namespace, documents: list[Any], working_dir: Path) -> dict[str, Any]:
    from ragkit.rag import RAG
    from ragkit.sections.index import IndexConfig
    from ragkit.settings import Settings
    from ragkit.testing import HashEmbedder

    llm = ProcessRules() if args.llm == "process" else "offline"
    events = {"documents_committed": 0, "chunks_extracted": 0}

    def progress(event: str, n: int) -> None:
        if event in events:
            events[event] += n

    rag = RAG(Settings(working_dir=working_dir), llm=llm, embedder=HashEmbedder({"dimension": 64}),
              index=IndexConfig(chunk_size=args.chunk_size, chunk_overlap=args.overlap), progress=progress)
    complete = True
    async with rag:
        started = time.perf_counter()
        dog = LoopWatchdog(threshold=0.1) if args.watchdog else contextlib.nullcontext()
        with LoopLag() as lag, dog:
            try:
                _, report = await asyncio.wait_for(rag.ainsert(documents=documents), args.seconds)
                chunks = report.chunks
            except asyncio.TimeoutError:
                complete, chunks = False, None
        seconds = time.perf_counter() - started
        samples = sorted(lag.samples)
    if args.watchdog:
        args.watchdog.write_text(json.dumps(dog.report(), indent=1) + "\n")
    return {
        "complete": complete, "insert_s": round(seconds, 1), "chunks": chunks,
        "chunks_extracted": events["chunks_extracted"], "documents_committed": events["documents_committed"],
        "loop_lag": lag.summary() | {"p50_ms": round(samples[len(samples) // 2] * 1000, 1) if samples else 0.0,
                                     "over_50ms": sum(s > 0.05 for s in samples), "ticks": len(samples)},
    }


FLOOR = """
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from index_latency import LoopLag

async def main():
    with LoopLag() as lag:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it
    print(json.dumps(lag.summary()))

asyncio.run(main())
"""


def noise_floor() -> subprocess.Popen:
    """A process with nothing but the same ticker: the lag the machine's load
    alone causes (on a shared machine, the scheduler's delays), to read the
    run's figures against."""
    return subprocess.Popen([sys.executable, "-c", FLOOR, str(HERE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def _commit() -> str:
    import ragkit

    where = Path(ragkit.__file__).resolve().parent.parent
    try:
        return subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=200, help="chunks per document")
    parser.add_argument("--chunk-size", type=int, default=200, help="tokens per chunk")
    parser.add_argument("--overlap", type=int, default=20)
    parser.add_argument("--llm", choices=["process", "offline"], default="process")
    parser.add_argument("--seconds", type=float, default=3600.0, help="bound on the run")
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--watchdog", type=Path, help="write the loop's stalls over 100 ms, with their stacks, here")
    args = parser.parse_args()

    documents = build_documents(args.docs, args.chunks, args.chunk_size, args.overlap)
    load_before = os.getloadavg()
    floor = noise_floor()
    with tempfile.TemporaryDirectory(prefix="ragkit-loop-lag-") as tmp:
        result = asyncio.run(index(args, documents, Path(tmp)))
    result["noise_floor_lag"] = json.loads(floor.communicate("", timeout=60)[0])
    result |= {
        "docs": args.docs, "chunks_per_doc": args.chunks, "chunk_size": args.chunk_size, "llm": args.llm,
        "seconds_bound": args.seconds, "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()], "commit": _commit(),
        "cpus": os.cpu_count(), "at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
        "command": " ".join(["python", "benchmarks/loop_lag.py", *sys.argv[1:]]),
    }
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data.setdefault(args.label, {})[f"{args.docs}x{args.chunks}/{args.llm}"] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
