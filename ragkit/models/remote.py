"""The base class of model adapters that call a service."""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

from ragkit.errors import ConfigError
from ragkit.models.failures import Service
from ragkit.models.options import RemoteOptions, secret_value
from ragkit.models.retry import ModelCalls
from ragkit.models.usage import UsageLog
from ragkit.protocols.models import ModelAdapter


class RemoteModel(ModelAdapter):
    """Base of model adapters that call a service: resolves ``base_url`` and
    the API key, and owns the call runner (``self.calls``), the usage log
    (``self.usage``) and the client (``self.client()``, made on first use).

    A subclass sets the attributes below (per instance in ``configure``),
    implements ``new_client`` and ``client_errors`` (and ``close_client`` when
    the client has no ``async close()``), then sends every request through
    ``self.calls`` and records what the service reports in ``self.usage``.
    """

    section: ClassVar[str] = "llm"
    """The settings section it is configured in, for messages: llm, embedder, reranker."""
    service_name: str = "model service"
    default_url: str = ""
    url_env: str | None = None
    """Environment variable read when ``base_url`` is not set."""
    key_env: tuple[str, ...] = ()
    """Environment variables read, in order, when ``api_key`` is not set."""
    key_required_at_default_url: bool = False
    """A hosted service always needs a key: fail at construction without one."""
    options: RemoteOptions

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.configure()
        env_url = os.environ.get(self.url_env) if self.url_env else None
        self.base_url = (self.options.base_url or env_url or self.default_url).rstrip("/")
        self._api_key = secret_value(self.options.api_key, *self.key_env)
        if self._api_key is None and self.key_required_at_default_url and self.base_url == self.default_url:
            raise ConfigError(f"the {self.name} {self.section} adapter has no API key: {self.api_key_hint()}")
        timeouts, connection_errors = self.client_errors()
        self.usage = UsageLog()
        self.calls = ModelCalls(
            self.options.retry_policy(),
            self.service(),
            max_concurrency=self.options.max_concurrency,
            timeouts=timeouts,
            connection_errors=connection_errors,
        )
        self._client: tuple[Any, asyncio.AbstractEventLoop] | None = None

    def configure(self) -> None:
        """Called once the options are parsed, before anything is resolved:
        adjust the attributes above to the options here."""

    def api_key_hint(self) -> str:
        env = " or ".join(self.key_env) or "the service's key variable"
        return (
            f"set api_key in [{self.section}.options] (or RAGKIT_{self.section.upper()}__API_KEY) "
            f"or {env} to a key this server accepts"
        )

    def service(self) -> Service:
        return Service(
            self.service_name, self.base_url, self.model_name(), self.api_key_hint(), self.options.timeout,
            self.section,
        )

    def model_name(self) -> str:
        return str(getattr(self.options, "model", self.name))

    def client_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        """(timeout types, connection error types) of the client library."""
        return (), ()

    def new_client(self) -> Any:
        raise NotImplementedError

    async def close_client(self, client: Any) -> None:
        await client.close()

    def client(self) -> Any:
        """The client, made on first use; it belongs to the event loop it was made
        on, like its connections (``RAG`` runs every call on one loop)."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._client[1] is not loop:
            if not self._client[1].is_closed():
                raise RuntimeError(
                    f"the {self.name} {self.section} adapter is in use on another event loop, which its "
                    "HTTP connections belong to. Fix: use one adapter object per event loop, or "
                    "`await adapter.aclose()` on the first loop before using it on another"
                )
            self._client = None  # its loop has ended, and its connections with it
        if self._client is None:
            self._client = (self.new_client(), loop)
        return self._client[0]

    async def aclose(self) -> None:
        """Close the client; the adapter stays usable (the next call makes a new one)."""
        made, self._client = self._client, None
        if made is not None and not made[1].is_closed():  # else it went with its loop
            await self.close_client(made[0])

