"""Fixtures for the chroma plugin tests: a Chroma server and stores in both modes.

``chroma_url``: the server at ``RAGKIT_CHROMA_URL`` (or http://127.0.0.1:8000)
if one answers, else a private one started with ``scripts/chroma-server`` on a
free port for this session. ``make_store(mode, ...)`` builds opened stores
that are dropped and closed at the end of the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ragkit.protocols import StoreConfig
from ragkit.testing.ports import free_port as _free_port
from ragkit_chroma.store import ChromaVectorStore
from ragkit_chroma.testing import DEFAULT_URL, options_from_url, server_answers

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "chroma-server"


def _run_script(*args: str, state_dir: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--state-dir", str(state_dir)],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )


@pytest.fixture
def free_port():
    """``free_port()``: a loopback port nothing listens on."""
    return _free_port


@pytest.fixture
def chroma_script():
    """``chroma_script(*args, state_dir=..., env=...)``: run scripts/chroma-server."""
    return _run_script


@pytest.fixture(scope="session")
def chroma_url(tmp_path_factory):
    url = os.environ.get("RAGKIT_CHROMA_URL", DEFAULT_URL)
    if server_answers(url):
        yield url
        return
    state = tmp_path_factory.mktemp("chroma-server")
    port = str(_free_port())
    started = _run_script("start", "--port", port, "--path", str(state / "data"), state_dir=state)
    assert started.returncode == 0, f"could not start a Chroma server:\n{started.stdout}{started.stderr}"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _run_script("stop", "--port", port, state_dir=state)


@pytest.fixture(params=["embedded", "http"])
def mode(request):
    return request.param


@pytest.fixture
async def make_store(request, tmp_path):
    """``await make_store(mode, workspace=..., dimension=..., **options)``: an
    opened ChromaVectorStore; a unique workspace unless given."""
    made: list[ChromaVectorStore] = []

    async def make(mode: str, *, workspace: str | None = None, dimension: int = 4,
                   namespace: str = "chunks", open: bool = True, **options):
        if mode == "http":
            options = {**options_from_url(request.getfixturevalue("chroma_url")), **options}
        config = StoreConfig(
            namespace=namespace,
            workspace=workspace or f"t{uuid.uuid4().hex[:10]}",
            working_dir=tmp_path,
            options=options,
            dimension=dimension,
        )
        store = ChromaVectorStore(config)
        if open:
            await store.open()
        made.append(store)
        return store

    yield make
    for store in made:  # drop what the test left on a shared server
        if store.options.mode == "http":
            try:
                if not store.is_open:
                    await store.open()
                await store.drop()
            except Exception:
                pass
        await store.close()
