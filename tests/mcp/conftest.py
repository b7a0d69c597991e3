"""The live ``ragkit serve`` of the HTTP tests is tests/server's own
(``server_support``: a subprocess on a free loopback port, keys made as
``ragkit keys create`` makes them); its folder is not on ``sys.path`` from
here, as pytest adds only each test file's own folder."""

from __future__ import annotations

import sys
from pathlib import Path

SERVER_TESTS = str(Path(__file__).resolve().parents[1] / "server")
if SERVER_TESTS not in sys.path:
    sys.path.append(SERVER_TESTS)
