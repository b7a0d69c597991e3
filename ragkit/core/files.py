"""Files ragkit writes are its owner's alone.

A workspace holds every document's text, whatever its access list, and the
server's folder holds uploads, jobs and API keys: another local user must read
none of it. Folders ragkit creates are made ``0700`` (so nothing inside is
reachable, whatever a file's own mode), and the ``ragkit`` command runs with
umask ``077`` (files ``0600``), which its server and worker processes inherit.
A folder that already exists keeps the mode its owner gave it.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` and each missing parent, created ``0700`` (``Path.mkdir``
    applies ``mode`` to the last folder only)."""
    path = Path(path)
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another writer
            continue
        os.chmod(folder, 0o700)  # mkdir's mode is masked by the umask; 0700 is never wider than asked
    path.mkdir(exist_ok=True)  # a file there fails here, as Path.mkdir would
    return path


def private_umask() -> None:
    """For the ``ragkit`` command: every file it and its children create is ``0600``."""
    os.umask(PRIVATE_UMASK)
