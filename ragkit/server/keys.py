"""API keys: stored hashed (SHA-256 of a 256-bit random token), shown once.

A key is bound to workspaces (names, or ``*`` for all), a principal (user and
groups) and a scope: ``read`` < ``write`` < ``admin``. The store is one SQLite
file (``[server] keys_file``) that ``ragkit keys`` edits while a server runs:
every lookup reads it, so a revoked key stops working at once.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from ragkit.access import check_name
from ragkit.core.files import private_dir
from ragkit.settings import check_workspace

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")
TOKEN_PREFIX = "rk_"


class ApiKey(BaseModel):
    id: str
    """Public handle (``ragkit keys revoke ID``): the first 12 hex digits of the hash."""
    name: str = ""
    workspaces: list[str]
    user: str
    groups: list[str] = Field(default_factory=list)
    scope: Scope = "read"
    created: float = Field(default_factory=time.time)
    revoked: bool = False

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        return check_name(value, "user")

    @field_validator("groups")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        return sorted({check_name(g, "group") for g in value})

    @field_validator("workspaces")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("bind the key to at least one workspace (or '*' for all)")
        return [w if w == "*" else check_workspace(w) for w in value]

    def allows(self, workspace: str, scope: Scope) -> bool:
        bound = "*" in self.workspaces or workspace in self.workspaces
        return bound and SCOPES.index(self.scope) >= SCOPES.index(scope)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class KeyStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._cache: dict[str, ApiKey | None] = {}
        self._stamp: tuple[int, int] | None = None

    def _fresh(self) -> bool:
        """Whether the file exists; forgets cached lookups when it changed since
        (``ragkit keys`` writing it), so a revoke counts from the next request."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._cache.clear()
            return False
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._cache.clear()
            self._stamp = stamp
        return True

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        private_dir(self.path.parent)
        db = sqlite3.connect(self.path, timeout=10)
        try:
            db.execute("CREATE TABLE IF NOT EXISTS keys (hash TEXT PRIMARY KEY, record TEXT NOT NULL)")
            yield db
            db.commit()
        finally:
            db.close()

    def create(self, workspaces: list[str], user: str, groups: list[str] = (), scope: Scope = "read", name: str = "") -> tuple[ApiKey, str]:
        """A new key and its token: the token is shown once and kept nowhere."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        hashed = digest(token)
        key = ApiKey(id=hashed[:12], name=name, workspaces=workspaces, user=user, groups=list(groups), scope=scope)
        with self._db() as db:
            db.execute("INSERT INTO keys VALUES (?, ?)", (hashed, key.model_dump_json()))
        return key, token

    def list(self) -> list[ApiKey]:
        if not self.path.exists():
            return []
        with self._db() as db:
            return [ApiKey.model_validate_json(r) for (r,) in db.execute("SELECT record FROM keys")]

    def revoke(self, key_id: str) -> bool:
        with self._db() as db:
            rows = db.execute("SELECT hash, record FROM keys WHERE hash LIKE ?", (key_id + "%",)).fetchall()
            if len(rows) != 1 or len(key_id) < 6:
                return False
            key = ApiKey.model_validate_json(rows[0][1]).model_copy(update={"revoked": True})
            db.execute("UPDATE keys SET record = ? WHERE hash = ?", (key.model_dump_json(), rows[0][0]))
        return True

    def active_count(self) -> int:
        if not self._fresh():
            return 0
        if "#active" not in self._cache:
            self._cache["#active"] = sum(not k.revoked for k in self.list())  # type: ignore[assignment]
        return self._cache["#active"]  # type: ignore[return-value]

    def lookup(self, token: str) -> ApiKey | None:
        """The active key of a token, or ``None``; compares hashes only."""
        if not token or not self._fresh():
            return None
        hashed = digest(token)
        if hashed in self._cache:
            return self._cache[hashed]
        with self._db() as db:
            row = db.execute("SELECT record FROM keys WHERE hash = ?", (hashed,)).fetchone()
        key = ApiKey.model_validate_json(row[0]) if row else None
        if key is None or key.revoked:
            return None  # misses are not cached: random tokens must not grow memory
        self._cache[hashed] = key
        return key

