"""A live ``ragkit serve`` (tests/server/server_support) and Debian's chromium
driven by Playwright. A missing chromium or Playwright is a failure naming the
fix, never a skip: `make install` installs both."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from server_support import Server  # noqa: E402

from webui_support import CHROMIUM, Keys, make_keys  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[Server, Keys]]:
    working_dir = tmp_path_factory.mktemp("webui") / "data"
    working_dir.mkdir()
    keys = make_keys(working_dir)
    with Server(working_dir).start(delay=0.15) as server:
        yield server, keys


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"chromium is missing at {CHROMIUM}: run `make install` (as root) or `apt-get install -y chromium`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is missing: run `make install` (pip install -e '.[webui-test]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            yield b
        finally:
            b.close()
