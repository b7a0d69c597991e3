"""The options an adapter needs to be tested, declared on the test side.

ragkit's own contract run (``tests/contract``) and backend matrix build every
registered adapter from its class. Embedded adapters run with no options;
one that needs a server URL or credentials says where to find them in a
*test-support* module, never on its production class: a mapping from
``"kind:name"`` to a function ``options(tmp_path) -> dict``, published in the
``ragkit.testing`` entry-point group::

    # ragkit_mydb/testing.py
    def mydb_options(tmp_path):
        url = os.environ.get("MYDB_TEST_URL")
        if not url:
            import pytest
            pytest.skip("set MYDB_TEST_URL to a scratch MyDB server")
        return {"url": url}

    CONTRACT_OPTIONS = {"kv:mydb": mydb_options}

    # pyproject.toml
    [project.entry-points."ragkit.testing"]
    mydb = "ragkit_mydb.testing:CONTRACT_OPTIONS"

The function's result becomes ``StoreConfig.options`` (or the model's
options). It may ``pytest.skip(...)`` when the backend is unreachable: the
adapter's contract tests are then skipped as unreachable, unless
``RAGKIT_CONTRACT_REQUIRE`` lists it. The plugin's own tests call the same
function, so both runs reach the backend the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

GROUP = "ragkit.testing"

OptionsFactory = Callable[[Path], Mapping[str, Any] | None]


@functools.cache
def registered() -> dict[str, OptionsFactory]:
    """``{"kind:name": options function}`` from every ``ragkit.testing`` entry
    point. A table that fails to load is an error (naming it): a test run
    must not quietly lose the options of an adapter."""
    found: dict[str, OptionsFactory] = {}
    owner: dict[str, str] = {}
    for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
        try:
            table = ep.load()
        except Exception as exc:
            raise RuntimeError(
                f"the {GROUP!r} entry point {ep.name} = {ep.value!r} failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(table, Mapping):
            raise TypeError(
                f"the {GROUP!r} entry point {ep.name} = {ep.value!r} must name a mapping "
                f"of 'kind:name' -> options(tmp_path), got {type(table).__name__}"
            )
        for key, factory in table.items():
            if key in found and found[key] is not factory:
                raise ValueError(f"{key!r} has contract options from both {owner[key]} and {ep.name}")
            found[key], owner[key] = factory, ep.name
    return found


def contract_options(kind: str, name: str, tmp_path: Path) -> dict[str, Any]:
    """The options to test adapter ``kind:name`` with (``{}`` when none are
    registered); may ``pytest.skip`` when its backend is unreachable."""
    factory = registered().get(f"{kind}:{name}")
    return dict(factory(tmp_path) or {}) if factory is not None else {}


def reachable_url(env: str, hint: str, default_port: int) -> str:
    """The URL in ``env`` when something accepts TCP connections there (a connect
    only: some servers dislike a dropped session), else ``pytest.skip`` saying
    what to set (``hint``)."""
    import os
    import socket
    from urllib.parse import urlparse

    import pytest

    url = os.environ.get(env)
    if not url:
        pytest.skip(f"set {env} ({hint})")
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "localhost", parsed.port or default_port), timeout=2):
            pass
    except OSError as exc:
        pytest.skip(f"{env}={url} does not accept connections: {exc}")
    return url


def required_options(factory: Callable[[], Mapping[str, Any]], keys: set[str], what: str) -> dict[str, Any]:
    """``factory()`` for a plugin's own tests: its skip (no server reachable)
    becomes a failure when ``RAGKIT_CONTRACT_REQUIRE`` names one of ``keys``
    (``"kind:name"``), as in the contract run: CI never skips a backend it
    promised to test."""
    import os

    import pytest

    required = {p.strip() for p in os.environ.get("RAGKIT_CONTRACT_REQUIRE", "").split(",")}
    try:
        return dict(factory())
    except pytest.skip.Exception as exc:
        if required & keys:
            pytest.fail(f"{what} is required (RAGKIT_CONTRACT_REQUIRE) but: {exc.msg}")
        raise
