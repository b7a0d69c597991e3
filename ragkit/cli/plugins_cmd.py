"""``ragkit plugins``: what is installed, and what failed to load."""

from __future__ import annotations

import argparse

from ragkit.cli.output import print_json, table
from ragkit.plugins import KINDS, AdapterInfo, Registry, get_registry


def rows() -> list[dict[str, str | None]]:
    registry = get_registry()
    out: list[dict[str, str | None]] = []
    for record in registry.plugins:
        for info in record.adapters:
            status, error = _state(registry, info)
            out.append(
                {
                    "kind": info.kind,
                    "name": info.name,
                    "plugin": record.name,
                    "distribution": record.distribution,
                    "version": record.version,
                    "status": status or record.status,
                    "error": error or record.error,
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
    order = {k: i for i, k in enumerate([*KINDS, "-"])}
    out.sort(key=lambda r: (order.get(r["kind"] or "-", 99), r["name"] or ""))
    return out


def _state(registry: Registry, info: AdapterInfo) -> tuple[str | None, str | None]:
    """A class's own problem (refused, or its name claimed twice), else (None, None)."""
    if info.error:
        return "error", info.error
    owner = registry.owner(info)
    if owner is not None and owner.conflicts:
        claimants = [owner, *owner.conflicts]
        return "conflict", "name registered by " + ", ".join(f"{c.distribution} ({c.plugin})" for c in claimants)
    return None, None


def run(args: argparse.Namespace) -> int:
    data = rows()
    if args.json:
        print_json(data)
    else:
        headers = ["kind", "name", "distribution", "version", "status", "error"]
        print(table(headers, [[r[h] for h in headers] for r in data]))
    return 0
