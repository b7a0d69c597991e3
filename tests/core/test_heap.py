"""The writer's GC policy: survivors of a full pass are frozen only while a
writer holds it, the hook goes away with the last holder, and thaw gives the
objects back (``ragkit.core.heap``)."""

import gc

from ragkit.core import heap


def test_survivors_of_a_full_pass_are_frozen_only_while_held():
    heap.thaw()
    kept = [[i] for i in range(1000)]  # tracked objects that survive
    hooks = len(gc.callbacks)
    with heap.freezing_survivors():
        with heap.freezing_survivors():  # a second writer of the process
            gc.collect()
            assert gc.get_freeze_count() >= len(kept)
        assert len(gc.callbacks) == hooks + 1  # the first writer still holds it
    assert len(gc.callbacks) == hooks
    heap.thaw()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gc.get_freeze_count() == 0, "frozen after the last writer let go"
    assert len(kept) == 1000


def test_a_cycle_that_dies_after_thaw_is_collected():
    heap.thaw()
    with heap.freezing_survivors():
        node: list = []
        node.append(node)  # a cycle, alive now
        gc.collect()
    del node
    heap.thaw()
    assert gc.collect() >= 1
