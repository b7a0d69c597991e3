"""``ragkit serve``: the HTTP service (REST for documents, query and graph).

Modules, one per concern: ``config`` (the ``[server]`` settings; no web
dependency, so ``ragkit.settings`` can import it), ``app`` (the factory
``create_app``), ``context`` (the one dependency that authenticates, checks the
workspace name and leases the workspace's RAG), ``keys`` (API keys, hashed),
``pool`` (open workspaces), ``jobs`` (background ingestion, one writer per
workspace), ``routes_*`` (one module per area), ``metrics`` (Prometheus).

FastAPI, uvicorn and prometheus_client come with the extra ``ragkit[server]``;
importing this package needs none of them.
"""

from __future__ import annotations

from typing import Any


def create_app(*args: Any, **kwargs: Any) -> Any:
    """``ragkit.server.app.create_app``, imported on first use."""
    from ragkit.server.app import create_app as factory

    return factory(*args, **kwargs)
