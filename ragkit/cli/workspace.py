"""Settings for the CLI's listing commands, which must find data, not make it.

Opening a ``RAG`` creates the workspace's folder; for ``status``,
``documents``, ``check`` and ``export`` that turned a wrong working dir (the
commonest first-hour mistake) into an empty workspace that answered "0 of 0"
and littered the current folder. The check holds where the folder is sure
evidence: the embedded doc status lives in it, so no folder means nothing was
ever indexed. With a server's doc status the data may live there without a
folder, and the command goes on as before. ``query`` and ``delete`` keep
their old behaviour: a query racing a workspace's first index, or a delete of
what was never indexed, already answer for themselves.
"""

from __future__ import annotations

from ragkit.errors import WorkspaceNotFoundError
from ragkit.settings import LoadedSettings, Settings, load_settings

EMBEDDED_DOC_STATUS = "sqlite"


def existing(config: str | None) -> Settings:
    """The settings, once their workspace is known to exist (see above)."""
    return existing_loaded(config).settings


def existing_loaded(config: str | None) -> LoadedSettings:
    """``existing``, with where the settings came from."""
    loaded = load_settings(config)
    settings = loaded.settings
    folder = settings.working_dir / settings.workspace
    if settings.doc_status.name == EMBEDDED_DOC_STATUS and not folder.is_dir():
        raise WorkspaceNotFoundError(settings.workspace, str(settings.working_dir.resolve()))
    return loaded
