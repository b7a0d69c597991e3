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
    p = sub.add_parser("index", help="index files, folders or text")
    p.add_argument("paths", nargs="+", help="files or folders")
    p.add_argument("--dry-run", action="store_true", help="build every prompt and report the cost; call no LLM, write nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.index_cmd")

    p = sub.add_parser("export", help="export the graph and its sources (JSON, GraphML, CSV)")
    p.add_argument("output", help="file (json, graphml) or folder (csv) to write")
    p.add_argument("--format", choices=["json", "graphml", "csv"], help="default: from the output's suffix")
    p.set_defaults(run="ragkit.cli.export_cmd")

    p = sub.add_parser("status", help="documents by status, graph size")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.docs_cmd:run_status")

    p = sub.add_parser("delete", help="delete documents and what only they support")
    p.add_argument("doc_ids", nargs="+")
    p.set_defaults(run="ragkit.cli.docs_cmd:run_delete")

    p = sub.add_parser("check", help="verify consistency across stores")
    p.add_argument("--repair", action="store_true", help="fix what can be fixed without the LLM")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.docs_cmd:run_check")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 0
    import importlib

    try:
        module, _, func = args.run.partition(":")
        return getattr(importlib.import_module(module), func or "run")(args)
    except RagkitError as exc:
        print(f"ragkit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
