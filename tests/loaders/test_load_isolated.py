"""``load_documents_isolated``: each loader runs in a child process with an
address-space limit and a timeout. A file that runs it out of memory, kills
it or hangs fails alone naming the limit; the next file is read (by a new
child), and this process's memory does not move.

The test loaders below are module-level classes: the child imports them by
name, as it imports a registered plugin's. Troubleshooting: "cannot be
imported by the loading process" means the child's sys.path lacks this
folder (pytest's rootdir insertion, which the child gets as the parent's sys.path)."""

from __future__ import annotations

import os
import shutil
import signal
import time
import types

import pytest

import ragkit.plugins
from ragkit.loaders import Loaded, Loader
from ragkit.loaders.limits import LoaderLimits
from ragkit.pipeline.load import LoadReport, load_documents
from ragkit.pipeline.load_isolated import load_documents_isolated
from ragkit.plugins import hookimpl
from ragkit.testing.bombs import normal_file, peak_growth, zip_bomb
from ragkit.testing.registry import registry_with

MiB = 1 << 20
MEMORY = 768 * MiB
"""The children's address space: the interpreter and the loaders' libraries take about 250 MiB."""


class Hungry(Loader):
    """Allocates (and touches) 64 MiB at a time until memory runs out."""

    name = "hungry"
    extensions = (".hungry",)

    def load(self, data: bytes, name: str) -> Loaded:
        held = []
        while True:
            held.append(bytearray(64 * MiB))


class Killed(Loader):
    """Dies the way the kernel's OOM killer ends a process: SIGKILL."""

    name = "killed"
    extensions = (".killed",)

    def load(self, data: bytes, name: str) -> Loaded:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


class Slow(Loader):
    name = "slow"
    extensions = (".slow",)

    def load(self, data: bytes, name: str) -> Loaded:
        time.sleep(120)
        return Loaded("too late")


@pytest.fixture
def with_test_loaders(monkeypatch):
    module = types.ModuleType("isolation_test_loaders")
    module.register_loaders = hookimpl(lambda register: [register(c) for c in (Hungry, Killed, Slow)])
    registry = registry_with(module)
    monkeypatch.setattr(ragkit.plugins, "get_registry", lambda **_: registry)


def outcomes(report: LoadReport) -> dict:
    return {item.path.rsplit("/", 1)[-1]: item for item in report.items}


def test_a_file_over_the_memory_limit_fails_alone(tmp_path, with_test_loaders):
    """Hungry runs out of memory in its child; the parent does not grow, and the
    files before and after it are read (the second by a new child)."""
    (tmp_path / "a.md").write_text("# A\n\nThe first file.\n")
    (tmp_path / "b.hungry").write_bytes(b"anything")
    normal_file(tmp_path / "c.docx")
    report, grown = peak_growth(
        lambda: load_documents_isolated([tmp_path], memory_bytes=MEMORY, timeout_s=60))
    items = outcomes(report)
    assert items["b.hungry"].outcome == "failed"
    assert "the limit is 768 MiB for reading one file ([server] loader_memory_bytes)" in items["b.hungry"].message
    assert items["a.md"].outcome == "loaded" and items["c.docx"].outcome == "loaded"
    assert grown < 64 * MiB, f"the parent grew by {grown >> 20} MiB"


def test_a_killed_child_fails_its_file_and_a_new_one_reads_the_next(tmp_path, with_test_loaders):
    (tmp_path / "a.killed").write_bytes(b"anything")
    normal_file(tmp_path / "b.epub")
    report = load_documents_isolated([tmp_path], memory_bytes=MEMORY, timeout_s=60)
    items = outcomes(report)
    assert items["a.killed"].outcome == "failed" and "was killed by SIGKILL" in items["a.killed"].message
    assert "[server] loader_memory_bytes" in items["a.killed"].message
    assert items["b.epub"].outcome == "loaded"


def test_a_file_over_the_timeout_fails_alone(tmp_path, with_test_loaders):
    (tmp_path / "a.slow").write_bytes(b"anything")
    normal_file(tmp_path / "b.xlsx")
    started = time.monotonic()
    report = load_documents_isolated([tmp_path], memory_bytes=MEMORY, timeout_s=3)
    items = outcomes(report)
    assert items["a.slow"].outcome == "failed"
    assert "longer than the limit of 3 s for one file ([server] loader_timeout)" in items["a.slow"].message
    assert items["b.xlsx"].outcome == "loaded"
    assert time.monotonic() - started < 30


def test_a_bomb_past_raised_bounds_is_stopped_by_the_memory_limit(tmp_path):
    """With the [loaders] bounds raised out of the way, a 1 GiB EPUB bomb runs
    its child out of memory: the backstop for a bomb the bounds do not know."""
    bomb = zip_bomb(tmp_path / "bomb.epub", 1 << 30)
    fine = normal_file(tmp_path / "fine.pptx")
    unbounded = LoaderLimits(max_decompressed_bytes=1 << 40, max_entry_bytes=1 << 40, max_compression_ratio=1e9)
    report, grown = peak_growth(lambda: load_documents_isolated(
        [bomb, fine], memory_bytes=MEMORY, timeout_s=120, limits=unbounded))
    items = outcomes(report)
    assert items["bomb.epub"].outcome == "failed" and "[server] loader_memory_bytes" in items["bomb.epub"].message
    assert items["fine.pptx"].outcome == "loaded"
    assert grown < 64 * MiB, f"the parent grew by {grown >> 20} MiB"


def test_the_caller_needs_no_main_guard(tmp_path):
    """The child is not multiprocessing's spawn: a script read from stdin (no
    file to import again, no ``__main__`` guard) loads files isolated too."""
    import subprocess
    import sys

    normal_file(tmp_path / "f.docx")
    script = ("from pathlib import Path; from ragkit.pipeline.load_isolated import load_documents_isolated; "
              f"r = load_documents_isolated([Path({str(tmp_path / 'f.docx')!r})], memory_bytes={MEMORY}, timeout_s=60); "
              "print(r.items[0].outcome)")
    done = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "loaded", done.stderr[-2000:]


def test_the_report_is_the_one_load_documents_gives(tmp_path):
    """Same walk, same rules: documents, outcomes and messages match for genuine files."""
    for ext in (".docx", ".pptx", ".xlsx", ".epub"):
        normal_file(tmp_path / f"f{ext}", f"The {ext} lantern is teal.")
    shutil.copy(tmp_path / "f.docx", tmp_path / "same.docx")
    (tmp_path / "notes.md").write_text("# Notes\n")
    isolated = load_documents_isolated([tmp_path], memory_bytes=MEMORY, timeout_s=60)
    in_process = load_documents([tmp_path])
    assert isinstance(isolated, LoadReport)
    assert isolated.items == in_process.items
    assert [d.model_dump() for d in isolated.documents] == [d.model_dump() for d in in_process.documents]
