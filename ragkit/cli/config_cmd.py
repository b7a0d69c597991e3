"""``ragkit config``: effective settings, where each came from, secrets masked."""

from __future__ import annotations

import argparse

from ragkit.backends import validate_options
from ragkit.cli.output import print_json, table
from ragkit.settings import LoadedSettings, load_settings


def _flatten(data: object, prefix: str = "") -> dict[str, object]:
    if isinstance(data, dict) and data:
        out: dict[str, object] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): data}


def report(loaded: LoadedSettings) -> dict[str, object]:
    values = _flatten(loaded.masked())
    return {
        "file": str(loaded.file) if loaded.file else None,
        "settings": [
            {"key": key, "value": value, "source": _source(loaded.sources, key)}
            for key, value in values.items()
        ],
        "problems": {k: v for k, v in validate_options(loaded.settings).items() if v},
    }


def _source(sources: dict[str, str], key: str) -> str:
    while key:
        if key in sources:
            return sources[key]
        key = key.rpartition(".")[0]
    return "default"


def run(args: argparse.Namespace) -> int:
    data = report(load_settings(args.config))
    if args.json:
        print_json(data)
        return 0
    print(f"settings file: {data['file'] or 'none (defaults; create ragkit.toml to change them)'}")
    print(table(["key", "value", "source"], [[s["key"], _show(s["value"]), s["source"]] for s in data["settings"]]))
    for kind, problem in data["problems"].items():
        print(f"problem with {kind}: {problem}")
    return 1 if data["problems"] else 0


def _show(value: object) -> str:
    if value == {}:
        return "{}"
    return "-" if value is None else str(value)
