"""The ``[mcp]`` section: who ``ragkit mcp`` (the stdio MCP server) runs as.

Over HTTP every MCP request is its API key's principal and scope; on stdio
there is no key, so the settings name them (``RAGKIT_MCP__USER=ann``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit.access import check_name


class McpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    """The principal's user: every tool sees only the documents it may read.
    None: unrestricted, as the ``ragkit`` command itself (``ragkit mcp`` says so at start)."""
    groups: list[str] = Field(default_factory=list)
    """The principal's groups (with ``user``)."""
    scope: Literal["read", "write"] = "read"
    """``write`` adds the ``insert_texts`` tool; ``read`` leaves the workspace as it is."""

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        return None if value is None else check_name(value, "user")

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, value: object) -> object:
        # RAGKIT_MCP__GROUPS=staff,hr reads as one string
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        return sorted({check_name(g, "group") for g in value}) if isinstance(value, list) else value
