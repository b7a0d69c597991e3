"""``ragkit status``, ``ragkit documents``, ``ragkit delete`` and ``ragkit check``."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ragkit.cli.output import print_json, table
from ragkit.cli.workspace import existing
from ragkit.core.text import shown_name
from ragkit.errors import DocumentNotFoundError
from ragkit.pipeline.check import check
from ragkit.pipeline.documents import DocumentPage, list_documents, resolve_documents
from ragkit.rag import RAG
from ragkit.settings import load_settings


def _rag(args: argparse.Namespace) -> RAG:
    return RAG(existing(args.config))


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
        return 0
    documents = data["documents"]
    print(table(["status", "documents"], list(documents.items())))
    print(f"{data['chunks']} chunks, {data['entities']} entities, {data['relations']} relations")
    if documents.get("failed"):
        print(f"{documents['failed']} document(s) failed: see why with `ragkit documents --status failed`")
    if documents.get("deleting"):
        print(
            f"{documents['deleting']} document(s) left mid-delete by an interrupted delete: the next "
            "`ragkit index` run finishes deleting them (`ragkit documents --status deleting` lists them)"
        )
    return 0


async def _documents(args: argparse.Namespace) -> DocumentPage:
    async with _rag(args) as rag:
        return await list_documents(rag.stores, args.status, args.limit, args.cursor)


def run_documents(args: argparse.Namespace) -> int:
    page = asyncio.run(_documents(args))
    if args.json:
        print_json(page.model_dump(mode="json"))
        return 0
    rows = [
        (d.id, d.status.value, d.chunks, f"{d.updated:%Y-%m-%d %H:%M:%S}", shown_name(d.path or ""), " ".join((d.error or "").split()))
        for d in page.documents
    ]
    print(table(["id", "status", "chunks", "updated (UTC)", "path", "error"], rows))
    of = f"{args.status} " if args.status else ""
    print(f"{len(rows)} of {page.total} {of}document(s)")
    if page.next_cursor:
        again = ["ragkit documents"] + ([f"--status {args.status}"] if args.status else [])
        again += [f"--limit {args.limit}", f"--cursor {page.next_cursor}"]
        print(f"next page: {' '.join(again)}")
    return 0


async def _delete(args: argparse.Namespace) -> dict[str, list[str]]:
    async with RAG(load_settings(args.config).settings) as rag:
        # Every argument is resolved before anything is deleted: one unknown
        # argument (a typo) deletes nothing.
        resolution = await resolve_documents(rag.stores, args.targets)
        deleted = set(await rag.indexer().delete(resolution.require_all()))
        return {a: [i for i in ids if i in deleted] for a, ids in resolution.matches.items()}


def run_delete(args: argparse.Namespace) -> int:
    try:
        deleted = asyncio.run(_delete(args))
    except DocumentNotFoundError as exc:
        print(f"ragkit: error: {exc}", file=sys.stderr)
        print(
            "ragkit: nothing was deleted. Give document ids or the paths the documents were indexed from "
            "(as given to `ragkit index`, absolute, or relative to this folder); `ragkit documents` lists both.",
            file=sys.stderr,
        )
        return 2
    shown: set[str] = set()
    for argument, ids in deleted.items():
        for doc_id in ids:
            if doc_id not in shown:
                shown.add(doc_id)
                print(f"deleted {doc_id}" + ("" if doc_id == argument else f" ({shown_name(argument)})"))
    print(f"deleted {len(shown)} document(s)")
    return 0


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
