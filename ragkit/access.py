"""Who may read a document: principals and access lists.

A document may carry an ``AccessList`` (users and/or groups). Empty on both
sides, or no list at all, means everyone in the workspace may read it. A query,
a listing, a graph read or an export made *as* a ``Principal`` sees only the
documents that principal may read, and nothing derived from the others: the
read side turns the principal into a document scope (``ragkit.core.scope``),
narrowed further, never widened, by the request's own ``doc_ids`` and
``doc_filter``. ``principal=None`` (the library's and the CLI's default) means
no restriction.

The list is kept in the document's status record, so every doc-status backend
keeps it and it can change without re-indexing (inserting the same content
with another list replaces it).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, field_validator

MAX_NAME_LENGTH = 256
"""The longest user or group name, in characters."""
MAX_NAMES = 1000
"""The most users (or groups) one access list or principal names."""


def check_name(value: object, what: str = "name") -> str:
    """A user or group name: a non-empty string of at most ``MAX_NAME_LENGTH``
    characters, without control characters and without surrounding whitespace."""
    if not isinstance(value, str):
        raise ValueError(f"a {what} must be a string, got {type(value).__name__}")
    if not value or value != value.strip():
        raise ValueError(f"{what} {value!r}: use a non-empty name without leading or trailing whitespace")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{what} {value[:40]!r}...: at most {MAX_NAME_LENGTH} characters, got {len(value)}")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in value):
        raise ValueError(f"{what} {value!r} holds a control or invisible character; remove it")
    return value


def _names(values: Iterable[object], what: str) -> list[str]:
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{what}s must be a list of names, not one string; write [{values!r}]")
    names = sorted({check_name(v, what) for v in values})
    if len(names) > MAX_NAMES:
        raise ValueError(f"at most {MAX_NAMES} {what}s, got {len(names)}")
    return names


class Principal(BaseModel):
    """Who a read is made for: a user and the groups they belong to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user: str
    groups: frozenset[str] = frozenset()

    @field_validator("user", mode="before")
    @classmethod
    def _user(cls, value: object) -> str:
        return check_name(value, "user")

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, value: object) -> frozenset[str]:
        if value is None:
            return frozenset()
        return frozenset(_names(value, "group"))  # type: ignore[arg-type]


class AccessList(BaseModel):
    """Who may read a document. Empty on both sides: everyone in the workspace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: list[str] = []
    groups: list[str] = []

    @field_validator("users", mode="before")
    @classmethod
    def _users(cls, value: object) -> list[str]:
        return _names(value or [], "user")  # type: ignore[arg-type]

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, value: object) -> list[str]:
        return _names(value or [], "group")  # type: ignore[arg-type]

    @property
    def public(self) -> bool:
        return not self.users and not self.groups

    def allows(self, principal: Principal | None) -> bool:
        """Whether ``principal`` may read; ``None`` (no restriction) may read everything."""
        if principal is None or self.public:
            return True
        return principal.user in self.users or not principal.groups.isdisjoint(self.groups)


def allows(access: AccessList | None, principal: Principal | None) -> bool:
    """Whether a document with this list (``None``: no list) is readable by ``principal``."""
    return access is None or access.allows(principal)


def access_list(users: Sequence[str] | None = None, groups: Sequence[str] | None = None) -> AccessList | None:
    """The list for these names, or ``None`` when both are empty (the CLI's flags)."""
    if not users and not groups:
        return None
    return AccessList(users=list(users or []), groups=list(groups or []))
