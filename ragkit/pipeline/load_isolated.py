"""The load stage with every loader run in a child process, for the server.

The ``[loaders]`` bounds stop the bombs we know of before they inflate; this is
the backstop for the ones we do not: a loader that exhausts memory or hangs
costs its own file, never the process that called it. ``load_documents`` walks
the inputs here as usual (same rules, same ``LoadReport``); only a loader's
``load(data, name)`` runs in the child, which has an address-space limit
(``RLIMIT_AS``, so an allocation past it fails there) and a wall-clock timeout
per file. A file that runs the child out of memory, kills it or outlasts the
timeout fails alone, with the limit named; the child is started again for the
next file. Otherwise one child reads all the files of a call, so a file costs
a pipe round trip, not a process start (about half a second with the loaders'
libraries).

The child is a fresh interpreter (``python -c``, safe to start from any thread:
the server calls this through ``asyncio.to_thread``) holding nothing of the
parent's memory. Not multiprocessing's ``spawn``: it imports the parent's main
script again in the child, which re-runs a script without a
``__name__ == "__main__"`` guard and fails for ``python -`` and notebooks. The
two talk over a pair of pipes, one pickle per message with its length first.
The loader reaches the child as its class (pickled by reference, so it must be
importable: a module-level class, as registered loaders are; the child gets
the parent's ``sys.path``), with its ``limits``. Linux, like ``RLIMIT_AS``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ragkit.loaders.base import LoaderError
from ragkit.loaders.limits import LoaderLimits, size
from ragkit.pipeline.load import LoadReport, load_documents
from ragkit.schema import Document

if TYPE_CHECKING:
    from ragkit.loaders import Loaded, Loader

_BOOT = (
    "import os, sys; from pickle import loads; jobs = os.fdopen(int(sys.argv[1]), 'rb'); "
    "size = int.from_bytes(jobs.read(8), 'little'); sys.path[:] = loads(jobs.read(size)); "
    "from ragkit.pipeline.load_isolated import _serve; "
    "_serve(jobs, os.fdopen(int(sys.argv[2]), 'wb'), int(sys.argv[3]))"
)
"""The child's program: the parent's ``sys.path`` first (the first message),
so it imports what the parent can, then the loop."""
_LENGTH = struct.Struct("<Q")


def load_documents_isolated(
    inputs: Iterable[str | Path | Document],
    *,
    memory_bytes: int,
    timeout_s: float,
    limits: LoaderLimits | None = None,
    max_files: int | None = None,
) -> LoadReport:
    """``load_documents`` with each file's loader in a child process limited to
    ``memory_bytes`` of address space and ``timeout_s`` seconds per file."""
    with _Child(memory_bytes, timeout_s) as child:
        return load_documents(inputs, max_files=max_files, limits=limits, run=child.run)


class _Child:
    """One child process reading files on request; started on first use and
    again after a file killed it."""

    def __init__(self, memory_bytes: int, timeout_s: float) -> None:
        self.memory_bytes, self.timeout_s = memory_bytes, timeout_s
        self._process: subprocess.Popen | None = None
        self._jobs: IO[bytes] | None = None
        self._results: IO[bytes] | None = None

    def __enter__(self) -> _Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop(gently=True)

    def run(self, loader: Loader, data: bytes, name: str) -> Loaded:
        try:
            job = pickle.dumps((type(loader), loader.limits, data, name), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise LoaderError(f"loader {loader.name!r} cannot run in a separate process, as the server runs "
                              f"loaders: its class must be importable by name ({exc})") from None
        jobs, results = self._start()
        try:
            _write(jobs, job)
        except OSError:  # the child died before taking the file
            raise LoaderError(self._died()) from None
        del job
        if not select.select([results], [], [], self.timeout_s)[0]:
            self._stop()
            raise LoaderError(
                f"reading it took longer than the limit of {self.timeout_s:g} s for one file "
                "([server] loader_timeout), so it was stopped: a file this slow to read is most likely "
                "hostile (a decompression bomb); if it is genuine, raise loader_timeout")
        try:
            status, payload = pickle.loads(_read(results))
        except (EOFError, OSError):
            raise LoaderError(self._died()) from None
        if status == "ok":
            return payload
        if isinstance(payload, MemoryError):
            self._stop()  # an allocation failed somewhere: do not trust the child with the next file
            raise LoaderError(self._over_memory("reading it ran out of memory"))
        raise payload

    # -- the process ---------------------------------------------------------------

    def _start(self) -> tuple[IO[bytes], IO[bytes]]:
        if self._process is None:
            job_r, job_w = os.pipe()
            result_r, result_w = os.pipe()
            try:
                self._process = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, str(job_r), str(result_w), str(self.memory_bytes)],
                    pass_fds=(job_r, result_w), stdin=subprocess.DEVNULL)
            finally:
                os.close(job_r)  # the child's ends live in the child: its death is EOF here
                os.close(result_w)
            self._jobs, self._results = os.fdopen(job_w, "wb"), os.fdopen(result_r, "rb")
            _write(self._jobs, pickle.dumps(sys.path))
        assert self._jobs is not None and self._results is not None
        return self._jobs, self._results

    def _stop(self, gently: bool = False) -> int | None:
        """End the child (``gently``: let it finish its loop first); its exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        for stream in (self._jobs, self._results):
            with contextlib.suppress(OSError):
                stream.close()  # EOF in the child: it returns
        if not gently:
            process.kill()  # keeps the exit code of a child that already ended
        try:
            return process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def _died(self) -> str:
        code = self._stop(gently=True)
        how = f"was killed by {_signal_name(-code)}" if code is not None and code < 0 else f"exited ({code})"
        return self._over_memory(f"the process reading it {how}, most likely out of memory or by a crash of "
                                 "the loader's library")

    def _over_memory(self, what: str) -> str:
        return (f"{what}: the limit is {size(self.memory_bytes)} for reading one file "
                "([server] loader_memory_bytes); a file that needs more is most likely a decompression bomb. "
                "The other files are read as usual; if it is genuine, raise loader_memory_bytes")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _write(stream: IO[bytes], message: bytes) -> None:
    stream.write(_LENGTH.pack(len(message)))
    stream.write(message)
    stream.flush()


def _read(stream: IO[bytes]) -> bytes:
    """One whole message (so one that fails to unpickle leaves the next intact); EOFError at the end."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    (length,) = _LENGTH.unpack(head)
    body = stream.read(length)
    if len(body) < length:
        raise EOFError
    return body


# -- in the child ----------------------------------------------------------------------


def _serve(jobs: IO[bytes], results: IO[bytes], memory_bytes: int) -> None:
    """Read files until the parent closes the pipe: (loader class, limits,
    bytes, name) in, ("ok", Loaded) or ("error", exception) out."""
    import resource

    # The soft limit only: a hard limit below memory_bytes (set by the host) stays, and wins.
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    while True:
        try:
            message = _read(jobs)
        except EOFError:
            return
        try:
            cls, limits, data, name = pickle.loads(message)
        except Exception as exc:  # the loader's class could not be imported here
            result: tuple[str, Any] = (
                "error", LoaderError(f"the loader's class cannot be imported by the loading process: {exc}"))
        else:
            del message
            result = _load(cls, limits, data, name)
            del data
        try:
            reply = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a result that does not pickle: the loader's bug, reported as one
            reply = pickle.dumps(("error", RuntimeError(f"its result cannot be sent back: {type(exc).__name__}: {exc}")))
        _write(results, reply)


def _load(cls: type, limits: LoaderLimits, data: bytes, name: str) -> tuple[str, Any]:
    try:
        loader = cls()
        loader.limits = limits
        return "ok", loader.load(data, name)
    except BaseException as exc:  # MemoryError included: the parent names the limit
        # Without its traceback the exception no longer holds the frames, and what they allocated.
        return "error", _portable(exc.with_traceback(None))


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling both ways, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
