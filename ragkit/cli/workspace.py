"""Settings for the CLI's read-only commands, which must find data, not make it.

Opening a ``RAG`` creates the workspace's folder; for ``status``, ``documents``,
``check``, ``delete``, ``export`` and ``query`` that would turn a wrong working
dir (the commonest first-hour mistake) into an empty workspace that answers
"0 of 0" and litters the current folder. The folder is a workspace's mark
whichever backends hold its data, as for the server (``WorkspacePool.exists``).
"""

from __future__ import annotations

from ragkit.errors import WorkspaceNotFoundError
from ragkit.settings import Settings, load_settings


def existing(config: str | None) -> Settings:
    """The settings, once their workspace is known to exist."""
    settings = load_settings(config).settings
    folder = settings.working_dir / settings.workspace
    if not folder.is_dir():
        raise WorkspaceNotFoundError(settings.workspace, str(settings.working_dir.resolve()))
    return settings
