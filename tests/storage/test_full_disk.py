"""A full disk reaches the user as a message naming the file and the fix, and
the next run, with space again, finishes the work.

Found by the fault campaign (tests/faults, docs/faults.md, seeds 1002, 1005,
1006): with the disk full, SQLite's "database or disk is full" / "disk I/O
error" escaped ``ragkit index`` as a traceback. The disk fills here through a
file size limit (``RLIMIT_FSIZE``, writes past it fail with EFBIG, as they fail
with ENOSPC on a full disk) on the ``ragkit`` process alone; ``limit`` picks
the point where it fills.

Troubleshooting: a traceback in the captured stderr names the write that
escaped ``StoreError`` (``storage/_sqlite.py`` ``_errors``, ``storage/snapshot_journal.py``
``_write_errors``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.errors import StoreError
from ragkit.storage.snapshot_journal import atomic_write_bytes, write_at

resource = pytest.importorskip("resource", reason="POSIX file size limits")

LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from ragkit.cli.main import main
sys.exit(main(sys.argv[2:]))
"""
CASES = {"sqlite": ("8", 48_000, "SQLite database")}
"""At small limits SQLite's files fill first; the file stores' writes are
tested below, on their own."""


def _corpus(folder: Path, n: int = 40) -> Path:
    folder.mkdir()
    for i in range(n):
        (folder / f"d{i:02d}.txt").write_text(
            f"Project F{i} is led by Person {i} in City {i % 7}. Person {i} hired Company {i % 5} "
            f"to build the F{i} prototype. Company {i % 5} delivered late, so Auditor {i} audited it.\n"
        )
    return folder


def _ragkit(tmp_path: Path, dimension: str, *args: str, limit: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    env.update(RAGKIT_WORKING_DIR=str(tmp_path / "data"), RAGKIT_EMBEDDER__DIMENSION=dimension)
    argv = [sys.executable, "-c", LIMITED, str(limit or 1 << 40), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case", list(CASES))
def test_full_disk_is_a_clear_error_and_the_next_run_finishes(tmp_path, case):
    dimension, limit, where = CASES[case]
    corpus = _corpus(tmp_path / "docs")
    full = _ragkit(tmp_path, dimension, "index", str(corpus), limit=limit)
    assert "Traceback" not in full.stderr, full.stderr
    assert full.returncode == 2, full.stderr
    assert where in full.stderr and "disk is full" in full.stderr and "run the command again" in full.stderr, full.stderr
    again = _ragkit(tmp_path, dimension, "index", str(corpus))
    assert again.returncode == 0, again.stderr
    check = _ragkit(tmp_path, dimension, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    status = _ragkit(tmp_path, dimension, "status", "--json")
    assert {k: n for k, n in json.loads(status.stdout)["documents"].items() if n} == {"processed": 40}, status.stdout


@pytest.mark.parametrize("write", ["snapshot", "journal append"])
def test_file_store_write_on_a_full_disk_is_a_store_error(tmp_path, write):
    """The numpy and networkx stores' files (``storage/snapshot_journal.py``): the snapshot
    replaced atomically, the journal appended in place."""
    target = tmp_path / "store.bin"
    target.write_bytes(b"x" * 100)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(StoreError, match="disk is full: free space and run the command again") as caught:
            if write == "snapshot":
                atomic_write_bytes(target, b"y" * 10_000)
            else:
                write_at(target, 100, b"y" * 10_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert str(target) in str(caught.value)
    if write == "snapshot":
        assert target.read_bytes() == b"x" * 100  # the old snapshot is intact
