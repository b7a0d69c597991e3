"""Entry point of the ``ragkit`` command.

Plugins are loaded lazily, by the commands that need them, so ``--help`` and
``--version`` work whatever state the installed plugins are in.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import ragkit
from ragkit.errors import RagkitError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragkit", description="Graph-RAG on pluggable backends."
    )
    parser.add_argument("--version", action="version", version=f"ragkit {ragkit.__version__}")
    parser.add_argument("--config", help="settings file (default: ./ragkit.toml or $RAGKIT_CONFIG)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plugins", help="list installed adapters and plugin load errors")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.plugins_cmd")

    p = sub.add_parser("config", help="show effective settings and their sources")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.config_cmd")

    p = sub.add_parser("doctor", help="write/read round trip through every configured backend")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.doctor_cmd")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 0
    import importlib

    try:
        return importlib.import_module(args.run).run(args)
    except RagkitError as exc:
        print(f"ragkit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
