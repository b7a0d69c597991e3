"""``PerProcess``: one object per process, made on first use."""

from __future__ import annotations

import itertools
import os

from ragkit.core.pools import PerProcess
from ragkit.testing.forking import check_in_fork


def test_the_object_is_made_once_and_again_after_drop():
    made = itertools.count()
    pool = PerProcess(lambda: next(made))
    assert (pool.get(), pool.get()) == (0, 0)
    pool.drop()
    assert pool.get() == 1


def test_a_forked_child_makes_its_own_and_the_parent_keeps_its():
    pool = PerProcess(lambda: os.getpid())
    parent = pool.get()
    check_in_fork(lambda: pool.get() == os.getpid() != parent)
    assert pool.get() == parent == os.getpid()


def test_a_guard_held_at_the_fork_does_not_stop_the_child():
    pool = PerProcess(object)
    with pool._guard:  # a parent thread inside get() at the moment of the fork
        check_in_fork(lambda: pool.get() is not None, timeout=10)
