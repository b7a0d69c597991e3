"""``ragkit plugins``: what is installed, and what failed to load."""

from __future__ import annotations

import argparse

from ragkit.cli.output import print_json, table
from ragkit.plugins import get_registry


def rows() -> list[dict[str, str | None]]:
    registry = get_registry()
    out: list[dict[str, str | None]] = []
    for record in registry.plugins:
        for info in record.adapters:
            owner = registry._adapters[info.kind][info.name]
            claimants = [owner, *owner.conflicts]
            conflict = (
                "name registered by " + ", ".join(f"{c.distribution} ({c.plugin})" for c in claimants)
                if owner.conflicts
                else None
            )
            out.append(
                {
                    "kind": info.kind,
                    "name": info.name,
                    "plugin": record.name,
                    "distribution": record.distribution,
                    "version": record.version,
                    "status": "conflict" if conflict else record.status,
                    "error": conflict or record.error,
                }
            )
        if record.error and not record.adapters:
            out.append(
                {
                    "kind": "-",
                    "name": record.name,
                    "plugin": record.name,
                    "distribution": record.distribution,
                    "version": record.version,
                    "status": "error",
                    "error": record.error,
                }
            )
    order = {k: i for i, k in enumerate(["kv", "vector", "graph", "doc_status", "llm", "embedder", "reranker", "tokenizer", "-"])}
    out.sort(key=lambda r: (order.get(r["kind"] or "-", 99), r["name"] or ""))
    return out


def run(args: argparse.Namespace) -> int:
    data = rows()
    if args.json:
        print_json(data)
    else:
        headers = ["kind", "name", "distribution", "version", "status", "error"]
        print(table(headers, [[r[h] for h in headers] for r in data]))
    return 0
