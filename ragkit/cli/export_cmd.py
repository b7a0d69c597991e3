"""``ragkit export OUTPUT``: the graph and its source chunks as JSON, GraphML or CSV."""

from __future__ import annotations

import argparse
import asyncio

from ragkit.pipeline.export import ExportSummary
from ragkit.rag import RAG
from ragkit.cli.workspace import existing


async def _export(args: argparse.Namespace) -> ExportSummary:
    async with RAG(existing(args.config)) as rag:
        return await rag.aexport(args.output, args.format)


def run(args: argparse.Namespace) -> int:
    s = asyncio.run(_export(args))
    if s.format == "graphml":  # the graph only: chunk texts are in the JSON and CSV exports
        print(f"exported {s.entities} entities and {s.relations} relations to {s.path} (graphml: the graph only; "
              "the source chunks' texts are in --format json or csv)")
    else:
        print(f"exported {s.entities} entities, {s.relations} relations and {s.chunks} chunks to {s.path} ({s.format})")
    if s.escaped_values:
        print(
            f"{s.escaped_values} values held characters XML cannot carry (control characters, U+FFFE/U+FFFF); "
            "they are written as \\xNN / \\uNNNN text (the JSON and CSV exports keep them as they are)"
        )
    return 0
