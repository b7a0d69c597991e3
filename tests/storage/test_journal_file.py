"""The snapshot-and-journal machinery itself (``ragkit.storage.snapshot_journal``),
below the stores: frames, temporary files, write errors, the worker-thread
wait, and ``JournaledFile``'s bookkeeping at its edges (the 64 KiB threshold,
a save under way, a file deleted, a file not loaded yet).

``test_journal.py`` drives the same code through the two stores; here a toy
store (a dict saved as JSON) makes each edge easy to reach and to check.

Troubleshoot: a message test failing shows the message as written next to the
expected one; a threshold test prints the sizes it compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragkit.errors import StoreError
from ragkit.protocols.base import StoreConfig
from ragkit.storage import NetworkXGraphStore
from ragkit.storage import snapshot_journal as sj
from ragkit.testing.store_files import journaled_file

SMALL = sj.SMALL_SNAPSHOT


# --- frames ---------------------------------------------------------------------------


def test_an_empty_payload_is_a_frame_even_at_the_end():
    """A frame is 12 bytes of head plus its payload, which may be empty."""
    assert sj.read_frames(sj.frame(b"")) == ([b""], 12)
    data = sj.frame(b"a") + sj.frame(b"")
    assert sj.read_frames(data) == ([b"a", b""], len(data))


def _damaged(payload: bytes) -> bytes:
    framed = bytearray(sj.frame(payload))
    framed[-1] ^= 0xFF  # the crc no longer matches
    return bytes(framed)


@pytest.mark.parametrize(
    ("data", "at"),
    [
        # One stray byte, then a whole frame: the next magic is one byte on.
        (sj.frame(b"a") + b"X" + sj.frame(b"b"), 13),
        # A damaged frame, a good one, then a torn tail that starts with the
        # magic: the good one in the middle is what proves the damage.
        (sj.frame(b"a") + _damaged(b"bb") + sj.frame(b"c") + sj.frame(b"dddd")[:8], 13),
    ],
    ids=["stray-byte", "good-frame-before-a-torn-tail"],
)
def test_a_good_frame_after_damage_is_corruption(data, at):
    """Any valid frame after the damage, wherever it starts, means the damage
    is not a torn tail; the error says where."""
    message = (
        f"the record at byte {at} is damaged but valid records follow it, "
        "so this is not a write cut short by a crash"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        sj.read_frames(data)


def test_a_torn_tail_after_good_frames_is_ignored():
    data = sj.frame(b"a") + sj.frame(b"bb")[:-1]
    assert sj.read_frames(data) == ([b"a"], 13)


@pytest.mark.parametrize("header", [{"format": "other/1", "generation": 1}, [1, 2], "x"], ids=["format", "list", "str"])
def test_a_journal_of_another_format_is_refused(tmp_path, header):
    """A first frame that is not this format's header is an error, whatever JSON it holds."""
    path = tmp_path / "g.json.journal"
    path.write_bytes(sj.frame(json.dumps(header).encode()) + sj.frame(b"{}"))
    with pytest.raises(ValueError, match=r"^not a ragkit\.journal/1 file$"):
        sj.read_journal(path)


# --- writing files --------------------------------------------------------------------


def test_a_failed_snapshot_write_names_the_file_and_leaves_nothing(tmp_path):
    """A target whose temporary name is too long for the filesystem: the open
    fails, the error names the file and the fix, and no temp file is left."""
    target = tmp_path / ("x" * 240)
    expected = (
        f"cannot write {target}: File name too long. Fix the cause and run the command again; "
        "what was flushed before is intact and the next run finishes the rest"
    )
    with pytest.raises(StoreError, match=f"^{re.escape(expected)}$"):
        sj.atomic_write_bytes(target, b"data")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_says_so(tmp_path):
    target = tmp_path / "g.json"

    def write(fh):
        raise OSError(28, "No space left on device")

    with pytest.raises(StoreError, match=r"^cannot write .*g\.json: No space left on device\. The disk is full: "):
        sj.atomic_write(target, write)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_journal_write_names_the_file(tmp_path):
    path = tmp_path / "missing" / "g.json.journal"
    expected = f"cannot write {path}: No such file or directory. Fix the cause"
    with pytest.raises(StoreError, match=f"^{re.escape(expected)}"):
        sj.write_at(path, 0, b"data")


# --- temporary files left by killed writers -------------------------------------------


@pytest.fixture
def live_child() -> Iterator[subprocess.Popen]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_temps_of_dead_writers_are_removed(tmp_path, live_child):
    """Removed: this target's temp of a writer that is gone. Kept: a live
    writer's temp (which is not signalled), another target's temp, a file that
    only looks like a temp, and a directory in the way."""
    target = tmp_path / "g.json"
    dead = _dead_pid()
    stale = tmp_path / f".g.json.{dead}.abcd.tmp"
    kept = [
        tmp_path / f".g.json.{live_child.pid}.abcd.tmp",
        tmp_path / f".other.json.{dead}.abcd.tmp",
        tmp_path / f".g.json.{dead}.abcd.bak",
        tmp_path / f"g.json.{dead}.abcd.tmp",
    ]
    for path in [stale, *kept]:
        path.write_bytes(b"x")
    in_the_way = tmp_path / f".g.json.{dead}.dir.tmp"
    in_the_way.mkdir()
    assert sj.remove_stale_temps(target) == [stale]
    assert sorted(tmp_path.iterdir()) == sorted([*kept, in_the_way])
    with pytest.raises(subprocess.TimeoutExpired):  # a signal would have ended it by now
        live_child.wait(0.5)


@contextlib.contextmanager
def _as_other_user(directory: Path) -> Iterator[int]:
    """(root only) The pid of a process of one user, while this thread acts as
    another: a writer that exists but cannot be signalled from here."""
    sleeper = subprocess.Popen(["sleep", "60"], user=65533)
    directory.chmod(0o777)
    os.seteuid(65534)
    try:
        yield sleeper.pid
    finally:
        os.seteuid(0)
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process this test cannot signal")
def test_a_writer_that_cannot_be_signalled_keeps_its_temp():
    """A pid that exists but is not ours (kill says EPERM) may be a live writer:
    its temp file stays."""
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        with _as_other_user(directory) as pid:
            temp = directory / f".g.json.{pid}.abcd.tmp"
            temp.write_bytes(b"x")
            assert sj.remove_stale_temps(directory / "g.json") == []
        assert temp.exists()


# --- a worker thread waited for -------------------------------------------------------


async def test_a_cancelled_caller_waits_for_its_thread_then_is_cancelled():
    started, release = threading.Event(), threading.Event()

    def work() -> int:
        started.set()
        release.wait(10)
        return 7

    task = asyncio.create_task(sj._in_thread(work))
    await asyncio.to_thread(started.wait, 10)
    for _ in range(2):  # cancelled twice: it still waits
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done(), "the caller stopped waiting while its thread still ran"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- JournaledFile, with a toy store ---------------------------------------------------


class Toy:
    """A dict saved through a JournaledFile: snapshot ``{"generation", "items"}``
    padded with spaces to ``size`` bytes, payloads ``{key: value}`` padded to ``payload_size``."""

    def __init__(self, path: Path, size: int = 0, payload_size: int = 0) -> None:
        self.file: sj.JournaledFile[str] = sj.JournaledFile(path, "toy")
        self.items: dict[str, int] = {}
        self.size, self.payload_size = size, payload_size

    def load(self) -> None:
        self.items = {}
        self.file.load(self._read, lambda payload: self.items.update(json.loads(payload)))

    def _read(self) -> int:
        data = json.loads(self.file.path.read_bytes())
        self.items = data["items"]
        return data["generation"]

    def set(self, key: str, value: int) -> None:
        self.items[key] = value
        self.file.touch([key])

    def encode(self, keys: list[str]) -> bytes:
        return json.dumps({k: self.items[k] for k in keys}).encode().ljust(self.payload_size)

    def snapshot(self, generation: int) -> sj.Writer:
        data = json.dumps({"generation": generation, "items": self.items}).encode().ljust(self.size)
        return lambda fh: fh.write(data)

    async def save(self, compact: bool = False) -> bool:
        return await self.file.save(self.encode, self.snapshot, compact=compact)


async def _saved_toy(path: Path, size: int = 0, payload_size: int = 0) -> Toy:
    """A toy with a snapshot on disk (of ``size`` bytes), loaded again."""
    toy = Toy(path, size, payload_size)
    toy.load()
    toy.set("a", 1)
    await toy.save(compact=True)
    toy = Toy(path, size, payload_size)
    toy.load()
    return toy


def test_a_file_not_loaded_yet_holds_nothing(tmp_path):
    """Before ``load()`` (the store's ``open()``): generation 0, nothing written,
    nothing pending, nothing changed on disk; saving or deleting is a bug."""
    jf = sj.JournaledFile(tmp_path / "t.json", "toy")
    assert (jf.generation, jf.journaled, jf.wrote, jf.dirty) == (0, False, False, False)
    assert jf.changed_on_disk() is False
    with pytest.raises(AssertionError, match=r"^load\(\) \(the store's open\(\)\) comes first$"):
        asyncio.run(jf.save(lambda keys: b"", lambda g: lambda fh: None))
    with pytest.raises(AssertionError, match=r"^load\(\) \(the store's open\(\)\) comes first$"):
        asyncio.run(jf.delete())


async def test_save_says_whether_it_wrote(tmp_path):
    toy = Toy(tmp_path / "t.json")
    toy.load()
    assert await toy.save() is False
    toy.set("a", 1)
    assert await toy.save() is True
    assert await toy.save() is False


@pytest.mark.parametrize(
    ("size", "payload_size", "appends"),
    [(SMALL, 0, True), (SMALL - 1, 0, False), (SMALL, SMALL, True), (SMALL, SMALL + 1, False)],
    ids=["snapshot-at-threshold", "snapshot-below", "payload-as-large-as-snapshot", "payload-larger"],
)
async def test_the_thresholds_are_inclusive(tmp_path, size, payload_size, appends):
    """A snapshot of exactly ``SMALL_SNAPSHOT`` bytes is journaled, and an
    append that brings the journal's payloads to the snapshot's size is still
    an append; one byte less (snapshot) or more (payload) compacts."""
    toy = await _saved_toy(tmp_path / "t.json", size, payload_size)
    assert toy.file.path.stat().st_size == size
    toy.set("b", 2)
    await toy.save()
    assert toy.file.journaled is appends, f"snapshot {size} bytes, payload {payload_size} bytes"
    assert toy.file.generation == (1 if appends else 2)
    again = Toy(toy.file.path)
    again.load()
    assert again.items == {"a": 1, "b": 2}


async def test_a_save_under_way_hides_changes_on_disk(tmp_path):
    """While the save lock is held, the files changing is this process's own
    write: reloading then would lose it."""
    toy = await _saved_toy(tmp_path / "t.json")
    async with toy.file.lock:
        toy.file.path.write_bytes(toy.file.path.read_bytes() + b" ")
        assert toy.file.changed_on_disk() is False
    assert toy.file.changed_on_disk() is True


async def test_after_a_delete_the_file_starts_afresh(tmp_path):
    """A delete is not news to this process, leaves no journal, and the next
    save writes a whole new snapshot."""
    toy = await _saved_toy(tmp_path / "t.json")
    await toy.file.delete()
    assert not toy.file.path.exists()
    assert (toy.file.changed_on_disk(), toy.file.journaled) == (False, False)
    toy.items = {}
    toy.set("c", 3)
    assert await toy.save() is True
    again = Toy(toy.file.path)
    again.load()
    assert again.items == {"c": 3}


async def test_writes_wait_for_every_reading_thread(tmp_path):
    """Two threads read the state; when the first ends, writes still wait for the second."""
    toy = await _saved_toy(tmp_path / "t.json")
    gates = [threading.Event(), threading.Event()]
    readers = [asyncio.create_task(toy.file.read_in_thread(lambda g=g: g.wait(10))) for g in gates]
    await asyncio.sleep(0.05)
    gates[0].set()
    await readers[0]
    writer = asyncio.create_task(toy.file.writable())
    await asyncio.sleep(0.05)
    assert not writer.done(), "a write went ahead while a thread still read the state"
    gates[1].set()
    await asyncio.wait_for(asyncio.gather(readers[1], writer), 10)


def _journal_with_generation(toy: Toy, generation: int) -> None:
    header = sj.frame(json.dumps({"format": sj.JOURNAL_FORMAT, "generation": generation}).encode())
    toy.file.journal.write_bytes(header + sj.frame(b'{"z": 9}'))


async def test_load_errors_name_the_files_and_the_fix(tmp_path):
    toy = await _saved_toy(tmp_path / "t.json")
    path, journal = toy.file.path, toy.file.journal

    _journal_with_generation(toy, 2)
    newer = (
        f"toy journal {journal} (generation 2) is newer than {path} (generation 1): the snapshot was "
        "replaced by an older copy; restore the matching snapshot, or delete the journal (losing the "
        "changes flushed since) and re-index"
    )
    with pytest.raises(StoreError, match=f"^{re.escape(newer)}$"):
        toy.load()

    journal.write_bytes(_damaged(b'{"format": 1}') + sj.frame(b"{}"))
    damaged = (
        f"cannot read toy journal {journal}: the record at byte 0 is damaged but valid records follow "
        "it, so this is not a write cut short by a crash; restore it together with t.json from a "
        "backup, or delete it to reopen the store as of its last snapshot (losing the changes flushed "
        "since) and re-index"
    )
    with pytest.raises(StoreError, match=f"^{re.escape(damaged)}$"):
        toy.load()

    _journal_with_generation(toy, 1)
    path.unlink()
    missing = (
        f"toy journal {journal} holds changes to {path}, which is missing: restore t.json from a "
        "backup, or delete the journal too and re-index"
    )
    with pytest.raises(StoreError, match=f"^{re.escape(missing)}$"):
        toy.load()


# --- the store hooks (JournaledStore) ---------------------------------------------------


def _graph(root: Path) -> NetworkXGraphStore:
    return NetworkXGraphStore(StoreConfig(namespace="g", workspace="w", working_dir=root, dimension=4))


async def test_compact_folds_the_journal_into_a_new_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(sj, "SMALL_SNAPSHOT", 0)  # let a small store journal
    store = _graph(tmp_path)
    await store.open()
    await store.upsert_nodes({"a": {"n": 1}})
    await store.flush()  # the first save writes a snapshot
    await store.upsert_nodes({"b": {"n": 2}})
    await store.flush()  # this one appends
    file = journaled_file(store)
    assert file.journaled and file.generation == 1
    await store.compact()
    assert not file.journal.exists() and file.generation == 2 and not store.wants_compaction
    await store.close()
    again = _graph(tmp_path)
    await again.open()
    assert {n: (await again.get_node(n)) for n in "ab"} == {"a": {"n": 1}, "b": {"n": 2}}
    await again.close()


async def test_a_store_that_does_not_compact_on_close_appends_its_last_changes(tmp_path, monkeypatch):
    """``Stores`` turns ``compact_on_close`` off: close then saves what is
    pending as a journal append, and the files keep it."""
    monkeypatch.setattr(sj, "SMALL_SNAPSHOT", 0)
    store = _graph(tmp_path)
    store.compact_on_close = False
    await store.open()
    await store.upsert_nodes({"a": {"n": 1}})
    await store.flush()
    await store.upsert_nodes({"b": {"n": 2}})
    await store.close()
    assert sj.read_journal(sj.journal_path(store.path)).generation == 1
    again = _graph(tmp_path)
    await again.open()
    assert await again.get_node("b") == {"n": 2}
    await again.close()
