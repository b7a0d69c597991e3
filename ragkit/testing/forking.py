"""Run a check in a forked copy of the test process, under a deadline.

What a pre-forking server (gunicorn's ``--preload``) or ``multiprocessing``
with ``fork`` does: the child gets the parent's module state, including thread
pools whose threads did not come along. A pool the parent used then takes the
child's tasks and never runs them, so a test must fork, use the pool, and fail
when the child does not finish rather than wait with it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable


def check_in_fork(check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Fork; the child runs ``check`` and exits 0 if it returns true, 1 if
    false, 2 if it raises. Raises ``AssertionError`` when the child fails or
    is still running after ``timeout`` seconds (it is then killed)."""
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if check() else 1
        finally:
            os._exit(code)  # never back into the parent's test run
    deadline = time.monotonic() + timeout
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError(f"the forked process did not finish in {timeout:g} s: it waited on a pool it copied")
    code = os.waitstatus_to_exitcode(done[1])
    assert code == 0, f"the check failed in the forked process (exit {code}: 1 false, 2 raised)"
