"""While the app runs, threads hand the GIL back to the serving loop within
``SWITCH_INTERVAL`` (``ragkit.server.app``); the interval is restored after.
Troubleshooting: a failure means the lifespan no longer sets it, and requests
wait up to 5 ms per busy worker thread each time the loop takes the GIL."""

from __future__ import annotations

import sys

from ragkit.server.app import SWITCH_INTERVAL, create_app
from ragkit.settings import Settings


async def test_the_app_shortens_the_switch_interval_while_it_runs(tmp_path):
    before = sys.getswitchinterval()
    assert before > SWITCH_INTERVAL, "the default interval is already short: nothing to tell"
    app = create_app(Settings(working_dir=tmp_path))
    async with app.router.lifespan_context(app):
        assert sys.getswitchinterval() <= SWITCH_INTERVAL
    assert sys.getswitchinterval() == before
