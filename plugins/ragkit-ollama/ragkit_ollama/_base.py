"""What the chat and embedding adapters share: options and the ``ollama``
client; retries, limits and usage come from ``ragkit.models.RemoteModel``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ragkit.models import RemoteModel, RemoteOptions

OLLAMA_URL = "http://127.0.0.1:11434"


class OllamaOptions(RemoteOptions):
    """Options of both ``ollama`` adapters (plus the connection, retry and
    concurrency ones of ``RemoteOptions``).

    - ``base_url``: the Ollama server, with a path prefix if it sits behind a
      proxy (``http://gpu-box:11434``, ``https://proxy.example/ollama``).
      Default ``OLLAMA_HOST``, else ``http://127.0.0.1:11434``.
    - ``api_key``: a bearer token for ollama.com or an authenticating proxy;
      default ``OLLAMA_API_KEY``.
    """

    model: str
    keep_alive: str | float | None = None
    """How long the server keeps the model loaded (``"30m"``, seconds, ``-1``: forever)."""
    model_options: dict[str, Any] = Field(default_factory=dict)
    """Further Ollama model options sent with every call (``top_p``, ``seed``, ``num_thread``...)."""


class OllamaAdapter(RemoteModel):
    """Base of the two adapters: an ``ollama.AsyncClient`` on ``base_url``."""

    service_name = "Ollama"
    default_url = OLLAMA_URL
    url_env = "OLLAMA_HOST"
    key_env = ("OLLAMA_API_KEY",)
    options: OllamaOptions

    def client_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        import httpx

        return (httpx.TimeoutException,), (httpx.TransportError,)

    def new_client(self) -> Any:
        import ollama

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        return ollama.AsyncClient(host=self.base_url, timeout=self.options.timeout, headers=headers)

    def model_options(self, **values: Any) -> dict[str, Any]:
        """``options`` for a call: ``model_options`` plus the set ``values``."""
        return {**self.options.model_options, **{k: v for k, v in values.items() if v is not None}}
