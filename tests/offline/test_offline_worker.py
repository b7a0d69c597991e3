"""The offline LLM's worker process lives no longer than its parent: a parent
that returns exits with it, and one killed outright (SIGKILL, no atexit) does
not leave it running, holding the parent's stdout and stderr open for whoever
waits on them (``ragkit.offline.llm._exit_with_parent``).

The parent is a real process running a real extraction; these tests are also
the ``child_tests`` of the ``llm:offline`` mutation target, whose mutants of
the worker's code mutmut cannot trace there.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

PARENT = """
import asyncio, multiprocessing, sys, time
from ragkit.core.prompts import build_extraction_request
from ragkit.offline import OfflineLLM

asyncio.run(OfflineLLM().complete(build_extraction_request("Gu Yao leads Project Haijia.")))
print(*(p.pid for p in multiprocessing.active_children()), flush=True)
if sys.argv[1] == "wait":
    time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Not exited: an orphan that exited stays a zombie until init reaps it."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" not in status.read_text()
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pid)


def test_a_parent_that_returns_exits_and_its_worker_with_it():
    done = subprocess.run([sys.executable, "-c", PARENT, "exit"], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    (worker,) = map(int, done.stdout.split())
    assert _gone_within(worker, 5), "the worker outlived a parent that exited"


def test_a_worker_whose_parent_is_killed_exits():
    parent = subprocess.Popen([sys.executable, "-c", PARENT, "wait"], stdout=subprocess.PIPE, text=True)
    try:
        (worker,) = map(int, parent.stdout.readline().split())
        assert _running(worker)
        time.sleep(1)  # the worker keeps running while its parent does
        assert _running(worker), "the worker exited while its parent ran"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
    assert _gone_within(worker, 10), "the worker outlived its killed parent"
