"""``ragkit status``, ``ragkit delete`` and ``ragkit check``."""

from __future__ import annotations

import argparse
import asyncio

from ragkit.cli.output import print_json, table
from ragkit.pipeline.check import check
from ragkit.rag import RAG
from ragkit.settings import load_settings


def _rag(args: argparse.Namespace) -> RAG:
    return RAG(load_settings(args.config).settings)


async def _status(args: argparse.Namespace) -> dict:
    async with _rag(args) as rag:
        return {
            "documents": await rag.astatus(),
            "entities": await rag.stores.graph.node_count(),
            "relations": await rag.stores.graph.edge_count(),
            "chunks": await rag.stores.chunks.count(),
        }


def run_status(args: argparse.Namespace) -> int:
    data = asyncio.run(_status(args))
    if args.json:
        print_json(data)
    else:
        print(table(["status", "documents"], list(data["documents"].items())))
        print(f"{data['chunks']} chunks, {data['entities']} entities, {data['relations']} relations")
    return 0


async def _delete(args: argparse.Namespace) -> list[str]:
    async with _rag(args) as rag:
        return await rag.indexer().delete(args.doc_ids)


def run_delete(args: argparse.Namespace) -> int:
    deleted = asyncio.run(_delete(args))
    missing = sorted(set(args.doc_ids) - set(deleted))
    print(f"deleted {len(deleted)} document(s)")
    for doc_id in missing:
        print(f"{doc_id}: no such document (see `ragkit status`)")
    return 1 if missing else 0


async def _check(args: argparse.Namespace):
    async with _rag(args) as rag:
        updater = rag.indexer().updater if args.repair else None
        return await check(rag.stores, updater, repair=args.repair)


def run_check(args: argparse.Namespace) -> int:
    report = asyncio.run(_check(args))
    if args.json:
        print_json({"ok": report.ok, "counts": report.counts, "problems": [p.__dict__ for p in report.problems]})
    else:
        print(", ".join(f"{v} {k}" for k, v in report.counts.items()))
        for p in report.problems:
            print(f"{'repaired' if p.repaired else 'PROBLEM'}: {p.kind}: {p.item}: {p.detail}")
        print("no problems found" if not report.problems else f"{len(report.problems)} problem(s)")
    return 0 if report.ok else 1
