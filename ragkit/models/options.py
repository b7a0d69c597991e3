"""Options every remote model adapter accepts, and helpers for options:
secrets from the option or the environment, a stable model identity."""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ragkit.ids import digest
from ragkit.models.retry import RetryPolicy


class RemoteOptions(BaseModel):
    """Options every remote model adapter accepts; adapters subclass this model."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    """Where the service listens, with its path prefix; each adapter has a default."""
    api_key: SecretStr | None = None
    """Sent as the adapter's credentials; each adapter names its environment fallback."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for a response (for a stream: between two pieces)."""
    max_retries: int = Field(default=4, ge=0)
    """Retries after a 429, a 5xx, a timeout or a lost connection (0: none)."""
    max_concurrency: int = Field(default=8, ge=1)
    """Calls this adapter has in flight at once, at most."""
    retry_initial_delay: float = Field(default=1.0, ge=0)
    """Seconds before the first retry; doubled for each further one."""
    retry_max_delay: float = Field(default=30.0, ge=0)
    """Ceiling of the backoff delay."""
    max_retry_after: float = Field(default=120.0, ge=0)
    """Longest ``Retry-After`` honoured; a longer one fails the call at once."""

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries,
            initial_delay=self.retry_initial_delay,
            max_delay=self.retry_max_delay,
            max_retry_after=self.max_retry_after,
        )


# -- helpers for options --------------------------------------------------------------


def secret_value(option: SecretStr | None, *env_names: str) -> str | None:
    """The option's secret, else the first set environment variable, else ``None``."""
    if option is not None and option.get_secret_value():
        return option.get_secret_value()
    return next((os.environ[n] for n in env_names if os.environ.get(n)), None)


def model_identity(provider: str, model: str, **outputs: Any) -> str:
    """A stable ``model_id``: ``provider:model``, plus a short digest of the
    options that change outputs when any is set (``temperature=0.2``...).
    Endpoints and secrets stay out of it, so moving a server keeps the cache."""
    relevant = {k: v for k, v in sorted(outputs.items()) if v not in (None, {}, [], ())}
    if not relevant:
        return f"{provider}:{model}"
    return f"{provider}:{model}#{digest(json.dumps(relevant, sort_keys=True, default=str))[:10]}"

