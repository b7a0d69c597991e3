"""Module-level worker pools that each process makes for itself.

A forked child (a pre-forking server such as gunicorn's ``--preload``, or
``multiprocessing`` with ``fork``) gets its parent's module state, including
executors whose threads or worker processes did not come along: a task sent to
one would wait forever. So a pool is made on first use, and forgotten in a
forked child, which makes its own on its first use there. The guard is made
anew too: a thread of the parent may have held it at the fork, and that thread
is gone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """``get()`` returns this process's object, made by ``make`` on first use."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._value: T | None = None
        self._guard = threading.Lock()
        # Holds this instance for the process's life: meant for module-level pools.
        os.register_at_fork(after_in_child=self._forget)

    def get(self) -> T:
        with self._guard:
            if self._value is None:
                self._value = self._make()
            return self._value

    def drop(self) -> None:
        """Forget the object (its worker died): the next ``get()`` makes another."""
        with self._guard:
            self._value = None

    def _forget(self) -> None:
        self._value, self._guard = None, threading.Lock()
