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

The child is started with ``spawn``: a fresh interpreter, safe to start from
any thread (the server calls this through ``asyncio.to_thread``), holding
nothing of the parent's memory. The loader reaches it as its class (pickled by
reference, so it must be importable: a module-level class, as registered
loaders are), with its ``limits``. Linux only, like ``RLIMIT_AS``.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
from collections.abc import Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragkit.loaders.base import LoaderError
from ragkit.loaders.limits import LoaderLimits, size
from ragkit.pipeline.load import LoadReport, load_documents
from ragkit.schema import Document

if TYPE_CHECKING:
    from ragkit.loaders import Loaded, Loader


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
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Connection | None = None

    def __enter__(self) -> _Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop(gently=True)

    def run(self, loader: Loader, data: bytes, name: str) -> Loaded:
        conn = self._start()
        try:
            conn.send((type(loader), loader.limits, data, name))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise LoaderError(f"loader {loader.name!r} cannot run in a separate process, as the server runs "
                              f"loaders: its class must be importable by name ({exc})") from None
        except OSError:  # the child died while taking the file
            raise LoaderError(self._died()) from None
        if not conn.poll(self.timeout_s):
            self._stop()
            raise LoaderError(
                f"reading it took longer than the limit of {self.timeout_s:g} s for one file "
                "([server] loader_timeout), so it was stopped: a file this slow to read is most likely "
                "hostile (a decompression bomb); if it is genuine, raise loader_timeout")
        try:
            status, payload = conn.recv()
        except (EOFError, OSError):
            raise LoaderError(self._died()) from None
        if status == "ok":
            return payload
        if isinstance(payload, MemoryError):
            self._stop()  # an allocation failed somewhere: do not trust the child with the next file
            raise LoaderError(self._over_memory("reading it ran out of memory"))
        raise payload

    # -- the process ---------------------------------------------------------------

    def _start(self) -> Connection:
        if self._conn is None:
            parent, child = self._context.Pipe()
            self._process = self._context.Process(
                target=_serve, args=(child, self.memory_bytes), name="ragkit-loader", daemon=True)
            self._process.start()
            child.close()  # the child's end lives in the child: its death is EOF here
            self._conn = parent
        return self._conn

    def _stop(self, gently: bool = False) -> int | None:
        """End the child (``gently``: let it finish its loop first); its exit code."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is None:
            return None
        if conn is not None:
            conn.close()  # EOF in the child: it returns
        process.join(timeout=5 if gently else 0)
        if process.exitcode is None:
            process.kill()
            process.join()
        return process.exitcode

    def _died(self) -> str:
        code = self._stop()
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


# -- in the child ----------------------------------------------------------------------


def _serve(conn: Connection, memory_bytes: int) -> None:
    """Read files until the parent closes the pipe: (loader class, limits,
    bytes, name) in, ("ok", Loaded) or ("error", exception) out."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        try:
            cls, limits, data, name = conn.recv()
        except EOFError:
            return
        except Exception as exc:  # the loader's class could not be imported here
            conn.send(("error", LoaderError(f"the loader's class cannot be imported by the loading process: {exc}")))
            continue
        result = _load(cls, limits, data, name)
        del data
        try:
            conn.send(result)
        except Exception as exc:  # a result that does not pickle: the loader's bug, reported as one
            conn.send(("error", RuntimeError(f"its result cannot be sent back: {type(exc).__name__}: {exc}")))


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
