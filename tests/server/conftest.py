"""The ``served`` fixture: one real server per test module (server_support)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server_support import Keys, Server, make_keys


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[Server, Keys]]:
    working_dir = tmp_path_factory.mktemp("srv") / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    limits = {"RAGKIT_SERVER__MAX_UPLOAD_BYTES": "300000", "RAGKIT_SERVER__MAX_UPLOAD_FILES": "5"}
    with Server(working_dir).start(extra_env=limits) as server:
        yield server, keys
