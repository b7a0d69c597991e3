"""``ragkit query "..." --mode mix [--stream] [--context-only] [--json] [--doc ID]... [--lexical on|off]
[--as-user U [--as-group G]...]``"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ragkit.access import Principal
from ragkit.cli.output import print_json
from ragkit.core.text import shown_name
from ragkit.errors import ConfigError, describe_validation_error
from ragkit.rag import RAG
from ragkit.schema import QueryParam, QueryResult
from ragkit.settings import load_settings


def _param(args: argparse.Namespace) -> QueryParam:
    values: dict = {
        "mode": args.mode,
        "stream": args.stream and not args.json,
        "only_need_context": args.context_only,
        "only_need_prompt": args.prompt_only,
        "doc_ids": args.doc_ids,
        "top_k": args.top_k,
        "max_total_tokens": args.max_total_tokens,
        **lexical_option(args),
    }
    return QueryParam(**{k: v for k, v in values.items() if v is not None})


def lexical_option(args: argparse.Namespace) -> dict[str, bool]:
    """``--lexical on|off`` as ``QueryParam`` fields; nothing when not given
    (the mode's own choice)."""
    choice = getattr(args, "lexical", None)  # callers building args by hand
    return {} if choice is None else {"lexical": choice == "on"}


def principal_from_args(args: argparse.Namespace) -> Principal | None:
    """``--as-user``/``--as-group``: the Python API's ``principal=`` (what a key
    of that user and groups would see over HTTP)."""
    user, groups = getattr(args, "as_user", None), getattr(args, "as_groups", None)  # callers building args by hand
    if user is None:
        if groups:
            raise ConfigError("--as-group needs --as-user: a principal is a user and its groups")
        return None
    try:
        return Principal(user=user, groups=frozenset(groups or ()))
    except ValueError as exc:
        raise ConfigError(f"--as-user/--as-group: {describe_validation_error(exc)}") from None


async def _query(args: argparse.Namespace) -> QueryResult:
    principal = principal_from_args(args)
    rag = RAG(load_settings(args.config).settings)
    async with rag:
        result = await rag.aquery(args.question, _param(args), principal=principal)
        if result.stream is not None:
            async for piece in result.stream:
                sys.stdout.write(piece)
                sys.stdout.flush()
            sys.stdout.write("\n")
        return result


def run(args: argparse.Namespace) -> int:
    result = asyncio.run(_query(args))
    if args.json:
        print_json(result.model_dump(mode="json"))
        return 0
    if args.context_only:
        print(result.context)
    elif args.prompt_only:
        print(result.prompt)
    elif result.stream is None:
        print(result.answer)
    if not (args.context_only or args.prompt_only):
        _print_references(result)
    return 0


def _print_references(result: QueryResult) -> None:
    """The sources the answer cites; the others of the context are only counted
    (a listed source reads as one backing the answer)."""
    if result.references:
        print("\nReferences:")
        for ref in result.references:
            print(f"[{ref.number}] {shown_name(ref.citation or ref.file_path or ref.doc_id)}")
    uncited = len(result.sources) - len(result.references)
    if uncited > 0:
        print(f"\n({uncited} more source{'s' if uncited > 1 else ''} in the context, not cited: "
              "--context-only shows the context, --json lists them under \"sources\")")
