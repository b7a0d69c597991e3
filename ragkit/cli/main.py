"""Entry point of the ``ragkit`` command.

Plugins are loaded lazily, by the commands that need them, so ``--help`` and
``--version`` work whatever state the installed plugins are in.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import ragkit
from ragkit.errors import RagkitError, WriterLeaseLostError, WriterLockTimeoutError


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
    p.add_argument("--allow-user", action="append", default=[], metavar="NAME",
                   help="only this user (repeatable) and the allowed groups may read these documents")
    p.add_argument("--allow-group", action="append", default=[], metavar="NAME",
                   help="only members of this group (repeatable) and the allowed users may read these documents")
    p.add_argument("--executor", choices=["local", "ray"],
                   help="where loading, chunking, LLM calls and embedding run (default: [index] executor, local); "
                        "the merge and the writes stay here")
    p.add_argument("--address", metavar="HOST:PORT",
                   help="the Ray cluster to run on (with --executor ray; default: [index.ray] address, "
                        "RAY_ADDRESS, else a Ray instance of this process's own)")
    p.set_defaults(run="ragkit.cli.index_cmd")

    p = sub.add_parser("export", help="export the graph and its sources (JSON, GraphML, CSV)")
    p.add_argument("output", help="file (json, graphml) or folder (csv) to write")
    p.add_argument("--format", choices=["json", "graphml", "csv"], help="default: from the output's suffix")
    p.set_defaults(run="ragkit.cli.export_cmd")

    p = sub.add_parser("migrate", help="copy the workspace to other backends (embeddings and LLM cache included)")
    p.add_argument("--to", required=True, metavar="OTHER.toml", help="the target's settings file (its backends and embedder)")
    p.add_argument("--workspace", help="the workspace to copy (default: the configured one)")
    p.add_argument("--to-workspace", metavar="NAME",
                   help="the target's workspace (default: the one OTHER.toml names, else the source's name)")
    p.add_argument("--force", action="store_true",
                   help="copy into a target that holds data: empty it first (what it holds is deleted)")
    p.add_argument("--batch", type=int, default=256, help="records per page read and written (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(run="ragkit.cli.migrate_cmd")

    p = sub.add_parser("query", help="answer a question with cited sources")
    p.add_argument("question")
    p.add_argument("--mode", default="ppr", choices=_RegisteredModes(), type=_mode, metavar="MODE",
                   help="how to retrieve: %(choices)s (default: %(default)s; plugins add more, see `ragkit plugins`)")
    p.add_argument("--stream", action="store_true", help="print the answer as it is generated")
    p.add_argument("--context-only", action="store_true", help="print the context; no answer call")
    p.add_argument("--prompt-only", action="store_true", help="print the answer prompt; no answer call")
    p.add_argument("--doc", action="append", dest="doc_ids", metavar="ID", help="only these documents (repeatable)")
    p.add_argument("--top-k", type=int, help="entities and relations per search")
    p.add_argument("--max-total-tokens", type=int, help="budget of the whole answer prompt")
    p.add_argument("--lexical", choices=["on", "off"],
                   help="the lexical channel (chunks ranked by the question's words, BM25) in this query, "
                        "or not (default: where the mode uses it: local, global)")
    p.add_argument("--json", action="store_true", help="the whole result as JSON")
    p.add_argument("--as-user", metavar="NAME", help="answer as this user reads: from the documents it may read only")
    p.add_argument("--as-group", action="append", dest="as_groups", metavar="NAME",
                   help="a group of --as-user (repeatable)")
    p.set_defaults(run="ragkit.cli.query_cmd")

    p = sub.add_parser("eval", help="retrieval quality on your own questions: recall, recall@k, tokens, latency")
    p.add_argument("questions", metavar="QUESTIONS.jsonl",
                   help="one JSON object per line: question, and passages, documents or expected (lists of strings)")
    p.add_argument("--mode", action="append", dest="modes", type=_mode, metavar="MODE",
                   help="a mode to evaluate (repeatable; default: naive, local, global, hybrid, mix, ppr)")
    p.add_argument("--budget", action="append", dest="budgets", type=int, metavar="TOKENS",
                   help="a max_total_tokens to evaluate at (repeatable; default: the query default, 30000)")
    p.add_argument("--k", type=int, default=5, help="recall@k counts the first k chunks (default: %(default)s)")
    p.add_argument("--compare", metavar="OTHER.toml", help="also run on this configuration, side by side")
    p.add_argument("--lexical", choices=["on", "off"],
                   help="the lexical channel (BM25 over chunks) in every mode, or in none: what it adds "
                        "on your documents (default: where the mode uses it: local, global)")
    p.add_argument("--as-user", metavar="NAME", help="ask as this user: from the documents it may read only")
    p.add_argument("--as-group", action="append", dest="as_groups", metavar="NAME", help="a group of --as-user (repeatable)")
    p.add_argument("--json", action="store_true", help="the reports as JSON")
    p.set_defaults(run="ragkit.cli.eval_cmd")

    p = sub.add_parser("graph", help="the knowledge graph: entity aliases")
    p.set_defaults(run="ragkit.cli.graph_cmd")
    actions = p.add_subparsers(dest="graph_command", metavar="ACTION", required=True)
    a = actions.add_parser(
        "aliases", help="entities linked as variants of one name (entity resolution); split or join a pair")
    a.add_argument("--of", metavar="NAME", help="only the links of this entity")
    a.add_argument("--split", nargs=2, metavar=("NAME", "OTHER"),
                   help="unlink two entities and keep them apart, also when re-indexed")
    a.add_argument("--join", nargs=2, metavar=("NAME", "OTHER"), help="undo a --split")
    a.add_argument("--rebuild", action="store_true",
                   help="recompute every link from the graph's entities (after indexing with aliases off)")
    a.add_argument("--json", action="store_true")

    p = sub.add_parser("status", help="documents by status, graph size")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.docs_cmd:run_status")

    p = sub.add_parser("documents", help="list documents: id, status, chunks, updated, path, error")
    # Checked by the listing (the statuses are listed once, in ragkit.schema,
    # which this module does not import, to keep --help and --version fast).
    p.add_argument("--status", help="only documents of this status (as `ragkit status` names them)")
    p.add_argument("--limit", type=int, default=100, help="documents per page (1 to 1000; default 100)")
    p.add_argument("--cursor", help="the next page after this one (printed at the end of a page)")
    p.add_argument("--json", action="store_true", help="the page as JSON, with next_cursor")
    p.set_defaults(run="ragkit.cli.docs_cmd:run_documents")

    p = sub.add_parser("delete", help="delete documents and what only they support")
    p.add_argument("targets", nargs="+", metavar="DOC_ID_OR_PATH",
                   help="document ids, or paths the documents were indexed from; nothing is deleted if any is unknown")
    p.set_defaults(run="ragkit.cli.docs_cmd:run_delete")

    p = sub.add_parser("check", help="verify consistency across stores")
    p.add_argument("--repair", action="store_true", help="fix what can be fixed without the LLM")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run="ragkit.cli.docs_cmd:run_check")

    p = sub.add_parser("serve", help="the HTTP service (needs ragkit[server]); docs/server.md")
    p.add_argument("--host", help="address to bind (default: [server] host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: [server] port, 9621)")
    p.add_argument("--workers", type=int, help="worker processes (default: [server] workers, 1)")
    p.add_argument("--allow-keyless", action="store_true",
                   help="serve loopback clients that send no key, with full access (local single-user use; "
                        "[server] allow_keyless)")
    p.set_defaults(run="ragkit.cli.serve_cmd")

    p = sub.add_parser("mcp", help="the MCP server over stdio, for agents (desktop apps, IDEs); docs/server.md")
    p.add_argument("--workspace", metavar="NAME", help="the workspace to serve (default: the configured one)")
    p.set_defaults(run="ragkit.cli.mcp_cmd")

    p = sub.add_parser("keys", help="API keys of the HTTP service: create, list, revoke")
    p.set_defaults(run="ragkit.cli.keys_cmd")
    keys = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    k = keys.add_parser("create", help="a new key, printed once")
    k.add_argument("--workspace", action="append", dest="workspaces", required=True, metavar="NAME",
                   help="a workspace the key may use (repeatable; '*' for all)")
    k.add_argument("--user", required=True, help="the principal's user name")
    k.add_argument("--group", action="append", dest="groups", default=[], metavar="NAME", help="a group of the principal (repeatable)")
    k.add_argument("--scope", choices=["read", "write", "admin"], default="read")
    k.add_argument("--name", default="", help="a label for `ragkit keys list`")
    k = keys.add_parser("list", help="keys (never their tokens)")
    k.add_argument("--json", action="store_true")
    k = keys.add_parser("revoke", help="revoke a key by the id `list` shows")
    k.add_argument("id")
    return parser


class _RegisteredModes:
    """The registry's query modes as argparse ``choices``, read only when a
    ``--mode`` is parsed or the query help is shown (``--help`` loads no plugin)."""

    def __contains__(self, name: object) -> bool:
        return True  # ``_mode`` checked it, with the registry's own message

    def __iter__(self):
        from ragkit.plugins import get_registry

        return iter(get_registry().names("query_mode"))


def _mode(name: str) -> str:
    from ragkit.plugins import get_registry

    try:
        get_registry().get("query_mode", name)
    except RagkitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 0
    import importlib

    from ragkit.core.files import private_umask

    private_umask()  # documents of every access list are written: for this user's eyes only
    try:
        module, _, func = args.run.partition(":")
        return getattr(importlib.import_module(module), func or "run")(args)
    except RagkitError as exc:
        from ragkit.redact import redact  # a model server's error text may echo a key

        print(f"ragkit: error: {redact(str(exc))}", file=sys.stderr)
        # 3: busy, retry later (another writer holds the lock, or took it from this stalled one)
        return 3 if isinstance(exc, (WriterLockTimeoutError, WriterLeaseLostError)) else 2
    except BrokenPipeError:
        # The reader went away (`ragkit query ... | head`): not an error of ours.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
