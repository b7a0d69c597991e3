"""``ragkit index PATH...``: load, chunk, extract, merge and index.

Exit status (``--dry-run`` too, for what it can know before any LLM call):

- 0: every input was indexed, was already indexed, or was skipped on purpose
  (an unsupported file type, an empty or binary file, a duplicate);
- 1: some input failed (a path not found or unreadable, a file name that is
  not UTF-8, a document whose extraction failed) and the others were indexed;
  the report names each failure and its cause;
- 2 (from ``ragkit``'s entry point): a usage or settings error, or an error
  that stopped the whole run (the embedder or a store failing); the message
  says which. Documents committed before it stay indexed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path

from ragkit.cli.output import print_json
from ragkit.cli.progress import ProgressLine
from ragkit.core.text import shown_name
from ragkit.offline import DefaultOfflineLLM, notice_once
from ragkit.rag import RAG
from ragkit.settings import Settings, load_settings


async def _index(args: argparse.Namespace) -> dict:
    settings = _with_executor(load_settings(args.config).settings, args)
    rag = RAG(settings)
    from ragkit.pipeline.load import load_documents

    loaded = load_documents(_as_paths(args.paths), limits=settings.loaders, submit=rag.executor.loader_submit())
    access = _access(args)
    documents = [d.model_copy(update={"access": access}) for d in loaded.documents] if access else loaded.documents
    progress = ProgressLine(len(loaded.documents), lambda: rag._cached_llm.stats if rag._cached_llm else None)
    rag.progress = progress
    async with rag:
        if isinstance(rag.llm.llm, DefaultOfflineLLM):
            notice_once()  # before the progress line, which the first call's notice would break
        report = await rag.indexer().insert(documents)
        counts = await rag.astatus()
        nodes, edges = await rag.stores.graph.node_count(), await rag.stores.graph.edge_count()
    progress.finish()
    return {
        "files": [item.__dict__ if hasattr(item, "__dict__") else item for item in loaded.items],
        "processed": len(report.processed),
        "skipped_unchanged": len(report.skipped),
        # the whole errors (redacted by the indexer): the one running the CLI needs the detail
        "failed": report.failed_details,
        "replaced": report.replaced,
        "recovered": report.recovered,
        "chunks": report.chunks,
        "dropped_extraction_rows": report.dropped_rows,
        "llm": report.llm,
        "seconds": round(report.seconds, 3),
        "status": counts,
        "graph": {"entities": nodes, "relations": edges},
    }


def _with_executor(settings, args: argparse.Namespace):
    """``--executor`` and ``--address`` over the ``[index]`` settings."""
    executor, address = getattr(args, "executor", None), getattr(args, "address", None)
    if address and (executor or settings.index.executor) != "ray":
        from ragkit.errors import InvalidValueError

        raise InvalidValueError("--address names a Ray cluster: use it with --executor ray")
    index = settings.index
    if executor:
        index = index.model_copy(update={"executor": executor})
    if address:
        index = index.model_copy(update={"ray": index.ray.model_copy(update={"address": address})})
    return settings if index is settings.index else settings.model_copy(update={"index": index})


def _access(args: argparse.Namespace):
    """The access list of ``--allow-user``/``--allow-group``, or ``None``; a bad name is a usage error."""
    from pydantic import ValidationError

    from ragkit.access import access_list
    from ragkit.errors import InvalidValueError, describe_validation_error

    try:
        return access_list(getattr(args, "allow_user", None), getattr(args, "allow_group", None))
    except ValidationError as exc:
        raise InvalidValueError(f"--allow-user/--allow-group: {describe_validation_error(exc)}") from None


def _as_paths(args: list[str]) -> list[Path | str]:
    """The arguments as paths; an empty one (an unset shell variable) stays an
    empty text, which loads nothing, instead of becoming the current folder."""
    return [Path(arg) if arg.strip() else arg for arg in args]


EMBEDDED = {kind: getattr(Settings(), kind).name for kind in ("kv", "vector", "graph", "doc_status")}
"""The embedded default stores, which keep nothing until a workspace folder exists."""


async def _dry_run(args: argparse.Namespace) -> dict:
    """Builds every prompt; opens the stores only to skip what is done or cached."""
    from ragkit.pipeline.dry_run import dry_run
    from ragkit.pipeline.load import load_documents

    settings = load_settings(args.config).settings
    loaded = load_documents(_as_paths(args.paths), limits=settings.loaders)
    rag = RAG(settings)
    model_id = rag.llm.llm.model_id  # the configured model, or the offline default
    embedded = all(getattr(settings, kind).name == name for kind, name in EMBEDDED.items())
    nothing_stored = embedded and not settings.working_dir.exists()
    if nothing_stored:
        report = await dry_run(loaded.documents, rag.tokenizer, rag.index_config, model_id=model_id)
    else:
        async with rag:
            report = await dry_run(
                loaded.documents, rag.tokenizer, rag.index_config, stores=rag.stores, model_id=model_id
            )
    result = report.model_dump(exclude={"per_document"})
    result["files"] = [_file_row(item) for item in loaded.items if _outcome(item) != "loaded"]
    result["loaded"] = [{"path": item.path, "pages": item.pages, "characters": item.characters}
                        for item in loaded.items if item.characters is not None]
    result["llm"] = settings.llm.name if settings.llm else None
    return result


def _print_files(files: list) -> None:
    """The inputs not loaded as they are, one line each: the same lines for a run and a dry run."""
    for item in files:
        if _outcome(item) != "loaded":
            # One line each, whatever a file's name holds (a newline would split it).
            path, message = (shown_name(str(_field(item, k))) for k in ("path", "message"))
            print(f"{path}: {_outcome(item)}: {message}")


def _print_dry_run(result: dict) -> None:
    _print_files(result["files"])
    for row in result["loaded"]:
        pages = f"{row['pages']} pages, " if row["pages"] is not None else ""
        print(f"{shown_name(row['path'])}: {pages}{row['characters']} characters")
    print(
        f"dry run: {result['documents']} documents to index ({result['skipped_unchanged']} unchanged), "
        f"{result['chunks']} chunks\n"
        f"  extraction calls: {result['llm_calls']} ({result['cached_calls']} more answered by the cache)\n"
        f"  input tokens:     {result['input_tokens']} (exact)\n"
        f"  output tokens:    ~{result['output_tokens_estimate']} (estimate, "
        f"{result['output_ratio']:.2f} per chunk token, {result['output_ratio_source']})"
    )
    if result["gleaning_calls"]:
        print(
            f"  gleaning calls:   {result['gleaning_calls']}, ~{result['gleaning_input_tokens_estimate']} "
            "input tokens (estimate: their prompts include the first answer)"
        )
    print("  summary calls depend on what extraction finds and are not included; no LLM was called."
          + _inputs_failed(result["files"], "\n  "))


def _inputs_failed(files: list, separator: str = "; ") -> str:
    n = sum(_outcome(f) == "failed" for f in files)
    return f"{separator}{n} input(s) could not be loaded (listed above)" if n else ""


def _file_row(item) -> dict:
    return {"path": str(_field(item, "path")), "outcome": _outcome(item), "message": _field(item, "message")}


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        result = asyncio.run(_dry_run(args))
        print_json(result) if args.json else _print_dry_run(result)
        return exit_status(result["files"], {})
    # The run's stray prints (Ray's driver prints a retried task's notice to
    # stdout) go to stderr: stdout holds the report alone, as --json promises.
    with contextlib.redirect_stdout(sys.stderr):
        result = asyncio.run(_index(args))
    if args.json:
        print_json(result)
    else:
        _print_files(result["files"])
        for doc_id, error in result["failed"].items():
            print(f"{doc_id}: failed: {error}")
        print(
            f"indexed {result['processed']} documents ({result['chunks']} chunks), "
            f"{result['skipped_unchanged']} unchanged, {len(result['failed'])} failed, "
            f"{len(result['replaced'])} old versions replaced in {result['seconds']}s; "
            f"graph: {result['graph']['entities']} entities, {result['graph']['relations']} relations"
            + _inputs_failed(result["files"])
        )
    return exit_status(result["files"], result["failed"])


def exit_status(files: list, failed_documents: dict) -> int:
    """1 when an input or a document failed, else 0 (see the module's docstring)."""
    return 1 if failed_documents or any(_outcome(f) == "failed" for f in files) else 0


def _field(item, name: str):
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _outcome(item) -> str:
    return str(_field(item, "outcome"))
