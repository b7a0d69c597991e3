"""What the chat and embedding adapters share: options and the ``openai``
client; retries, limits and usage come from ``ragkit.models.RemoteModel``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ragkit.models import RemoteModel, RemoteOptions

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIOptions(RemoteOptions):
    """Options of both ``openai`` adapters (plus the connection, retry and
    concurrency ones of ``RemoteOptions``).

    - ``base_url``: any OpenAI-compatible server, with its path prefix:
      ``http://localhost:8000/v1`` (vLLM), ``http://localhost:1234/v1`` (LM Studio),
      ``https://api.deepseek.com/v1``, ``https://NAME.openai.azure.com/openai/v1``
      (Azure's v1 API). Default ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``.
      With ``api_version``: the Azure resource, ``https://NAME.openai.azure.com``.
    - ``api_key``: default ``OPENAI_API_KEY`` (with ``api_version``:
      ``AZURE_OPENAI_API_KEY`` first). Servers without auth need none.
    """

    model: str
    api_version: str | None = None
    """Azure OpenAI deployments: the ``api-version`` (e.g. ``2024-10-21``); ``model``
    is then the deployment name. Not needed for Azure's ``/openai/v1`` API."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra JSON fields sent with every request (server-specific parameters)."""


class OpenAIAdapter(RemoteModel):
    """Base of the two adapters: an ``openai.AsyncOpenAI`` client (or
    ``AsyncAzureOpenAI`` with ``api_version``) with its own retries off."""

    service_name = "OpenAI-compatible server"
    default_url = OPENAI_URL
    url_env = "OPENAI_BASE_URL"
    key_env = ("OPENAI_API_KEY",)
    key_required_at_default_url = True
    options: OpenAIOptions

    def configure(self) -> None:
        if self.options.api_version:
            self.service_name = "Azure OpenAI"
            self.key_env = ("AZURE_OPENAI_API_KEY", "OPENAI_API_KEY")

    def client_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        import openai

        return (openai.APITimeoutError,), (openai.APIConnectionError,)

    def new_client(self) -> Any:
        import openai

        common: dict[str, Any] = {
            "api_key": self._api_key or "no-key",  # local servers need none; the client insists
            "timeout": self.options.timeout,
            "max_retries": 0,  # ragkit.models.ModelCalls is the single retry policy
        }
        if self.options.api_version:
            return openai.AsyncAzureOpenAI(
                azure_endpoint=self.base_url, api_version=self.options.api_version, **common
            )
        return openai.AsyncOpenAI(base_url=self.base_url, **common)

    def extra_body(self) -> dict[str, Any] | None:
        return dict(self.options.extra_body) or None
