"""The ``[server]`` section of the settings (``RAGKIT_SERVER__PORT=9700``...).

Plain pydantic, no web dependency: ``ragkit.settings`` imports it, and the
server (``ragkit.server.perimeter``, ``uploads``, ``app``) and ``ragkit keys``
read it, so loading settings loads no part of the server.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""The names a browser uses for this machine: the default ``allowed_hosts``."""


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=9621, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    keys_file: Path | None = None
    """SQLite file of API keys; default ``<working_dir>/server_keys.sqlite``."""
    allow_keyless: bool = False
    """Serve loopback clients that send no key, unrestricted (no principal): for
    local single-user use only, so refused unless ``host`` is a loopback address."""
    allowed_hosts: list[str] = Field(default_factory=lambda: list(LOOPBACK_NAMES))
    """``Host`` header names served, any port (``*.example.com`` for subdomains,
    ``*`` for any); a specific bind ``host`` is added. Others are a 400: a page
    whose DNS name was rebound to this address names its own host."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Browser origins (``https://ui.example.com``), besides the server's own,
    that may send POST, PUT, PATCH or DELETE. Others are a 403."""
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1)
    """Largest request body outside uploads and text inserts (queries, chat,
    graph edits); also the allowance for form fields and framing on those two."""
    max_upload_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    """Largest file one upload may carry."""
    max_upload_files: int = Field(default=100, ge=1)
    """Most files (or texts) one request may carry."""
    pool_size: int = Field(default=8, ge=1)
    """Most workspaces open at once; the least recently used idle one is closed for a new one."""
    idle_timeout: float = Field(default=600.0, gt=0)
    """Seconds an unused workspace stays open."""
    job_attempts: int = Field(default=3, ge=1)
    """Starts of an ingestion job before one the server keeps stopping in is marked failed."""
    loader_memory_bytes: int = Field(default=2 * 1024**3, ge=256 * 1024**2)
    """Address space the process loading an upload's files may use (its
    RLIMIT_AS): a file whose loader needs more fails alone, the server lives on.
    The ``[loaders]`` bounds stop known bombs well below it; this catches the rest."""
    loader_timeout: float = Field(default=300.0, gt=0)
    """Seconds one file's loader may take before its process is stopped and the file fails alone."""

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        # RAGKIT_SERVER__ALLOWED_HOSTS=a.example,b.example reads as one string
        return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if "*" in pattern and pattern != "*" and not (pattern.startswith("*.") and "*" not in pattern[1:]):
                raise ValueError(f"{pattern!r}: a wildcard is '*' alone or a leading '*.' ('*.example.com')")
        return [host_name(p) for p in value]

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        origins = [origin_of(v) for v in value]
        for given, origin in zip(value, origins):
            if origin is None:
                raise ValueError(f"{given!r} is not an origin: write scheme://host[:port] (https://ui.example.com)")
        return origins


def host_name(host: str) -> str:
    """A host as the checks compare it: lower case, an IPv6 address without brackets."""
    return host.strip().lower().removeprefix("[").removesuffix("]")


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` in one spelling (lower case, no default port,
    no path), or ``None`` when ``url`` is not an http(s) origin (``null``)."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return None
    scheme = parts.scheme.lower()
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 80 if scheme == "http" else 443
    return f"{scheme}://{host}" + ("" if port in (None, default) else f":{port}")


def keys_path(working_dir: Path, server: ServerSettings) -> Path:
    if server.keys_file is None:
        return Path(working_dir) / "server_keys.sqlite"
    return server.keys_file if server.keys_file.is_absolute() else Path(working_dir) / server.keys_file
