"""``ragkit migrate --to OTHER.toml``: copy a workspace to other backends (docs/migrate.md).

The source is the usual settings (``--config``, ``./ragkit.toml``, the
environment), the target those of ``OTHER.toml``. The target's workspace is
``--to-workspace``, else the one ``OTHER.toml`` names, else the source's.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from ragkit.cli.progress import StatusLine
from ragkit.cli.workspace import EMBEDDED_DOC_STATUS
from ragkit.errors import ConfigError, WorkspaceNotFoundError
from ragkit.pipeline.migrate import MigrateReport, summary
from ragkit.rag import RAG
from ragkit.settings import Settings, check_workspace, load_settings


class MigrateLine(StatusLine):
    """The copy's progress: the part being copied and its records."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def __call__(self, part: str, done: int, total: int) -> None:
        if part not in self.parts:
            self.parts.append(part)
        self.show(f"copying {part}: {done}/{max(done, total)} records  (part {len(self.parts)})")


def _in(settings: Settings, workspace: str) -> Settings:
    try:
        return settings.model_copy(update={"workspace": check_workspace(workspace)})
    except ValueError as exc:
        raise ConfigError(f"workspace {workspace!r}: {exc}") from None


def _source(args: argparse.Namespace) -> Settings:
    """The source, once it is known to exist (as the listing commands check, ``cli/workspace.py``)."""
    settings = load_settings(args.config).settings
    if args.workspace:
        settings = _in(settings, args.workspace)
    folder = settings.working_dir / settings.workspace
    if settings.doc_status.name == EMBEDDED_DOC_STATUS and not folder.is_dir():
        raise WorkspaceNotFoundError(settings.workspace, str(settings.working_dir.resolve()))
    return settings


def _target(args: argparse.Namespace, source_workspace: str) -> Settings:
    if not os.path.isfile(args.to):
        raise ConfigError(f"--to {args.to}: no such settings file; give the target's ragkit.toml")
    loaded = load_settings(args.to)
    named = loaded.sources.get("workspace", "default") != "default"
    return _in(loaded.settings, args.to_workspace or (loaded.settings.workspace if named else source_workspace))


async def _migrate(args: argparse.Namespace, line: MigrateLine) -> MigrateReport:
    source = _source(args)
    target = _target(args, source.workspace)
    async with RAG(source) as rag:
        return await rag.amigrate(target, force=args.force, batch=args.batch, progress=line)


def run(args: argparse.Namespace) -> int:
    line = MigrateLine()
    try:
        report = asyncio.run(_migrate(args, line))
    finally:
        line.finish()
    print(report.model_dump_json(indent=2) if args.json else summary(report))
    return 0
