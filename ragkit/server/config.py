"""The ``[server]`` section of the settings (``RAGKIT_SERVER__PORT=9700``...).

Plain pydantic, no web dependency: ``ragkit.settings`` imports it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=9621, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    keys_file: Path | None = None
    """SQLite file of API keys; default ``<working_dir>/server_keys.sqlite``."""
    max_upload_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    """Largest file one upload may carry."""
    max_upload_files: int = Field(default=100, ge=1)
    """Most files (or texts) one request may carry."""
    pool_size: int = Field(default=8, ge=1)
    """Most workspaces open at once; the least recently used idle one is closed for a new one."""
    idle_timeout: float = Field(default=600.0, gt=0)
    """Seconds an unused workspace stays open."""
    loader_memory_bytes: int = Field(default=2 * 1024**3, ge=256 * 1024**2)
    """Address space the process loading an upload's files may use (its
    RLIMIT_AS): a file whose loader needs more fails alone, the server lives on.
    The ``[loaders]`` bounds stop known bombs well below it; this catches the rest."""
    loader_timeout: float = Field(default=300.0, gt=0)
    """Seconds one file's loader may take before its process is stopped and the file fails alone."""


def keys_path(working_dir: Path, server: ServerSettings) -> Path:
    if server.keys_file is None:
        return Path(working_dir) / "server_keys.sqlite"
    return server.keys_file if server.keys_file.is_absolute() else Path(working_dir) / server.keys_file
