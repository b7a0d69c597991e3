"""The writer lock's rules every store follows, whatever its kind: each write
asks the store's ``fence`` first and writes nothing when it refuses
([store.fence.checked]), and ``discard()`` (or ``close()`` once the lock is
lost) never saves what was not saved yet ([store.discard.unflushed]).

``FencingTests`` is part of every store contract; what a write and a state
are for each kind is in ``base.kinds.KINDS``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ragkit.errors import WriterLeaseLostError
from ragkit.protocols.base import BaseStore, Capability
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.contract import needs
from ragkit.testing.contracts.base.inputs import durable_view
from ragkit.testing.contracts.base.kinds import KINDS, Kind

class StubFence:
    """A fence for tests: counts its checks; refuses them when ``refuse``."""

    def __init__(self, *, refuse: bool = False, lost: bool = False) -> None:
        self.refuse, self.lost, self.checks = refuse, lost, 0

    async def check(self) -> None:
        self.checks += 1
        if self.refuse:
            raise WriterLeaseLostError("the contract's fence refuses every write")


KEYS = ["a", "b", "n"]


class FencingTests:
    @checks("store.fence.checked")
    async def test_every_write_asks_the_fence_first(self, adapter):
        """With a fence set, each kind of write asks it before anything reaches
        the backend: refused, it raises the fence's error and the store holds
        what it held; allowed, it goes ahead. Reads never ask.

        Troubleshoot: the protocol's public methods ask the fence (the writer
        lock: a process that lost it must write nothing more); a store failing
        here replaces one (``@bypass_template``) without ``await self._fenced()``
        before its hook, or writes in a read.
        """
        kind = KINDS[self.contract_kind]
        for key in ("a", "b"):
            await kind.put(adapter, key)
        before = await kind.state(adapter, KEYS)
        refusing = StubFence(refuse=True)
        adapter.fence = refusing
        try:
            for name, write in kind.writes.items():
                with pytest.raises(WriterLeaseLostError):
                    await write(adapter)
                assert refusing.checks > 0, f"{name}() wrote without asking the fence"
                refusing.checks = 0
            for name, read in kind.reads.items():
                await read(adapter)
                assert refusing.checks == 0, f"{name}() asked the fence: reads never do"
        finally:
            adapter.fence = None
        after = await kind.state(adapter, KEYS)
        assert after == before, f"writes the fence refused changed the store: {before} became {after}"
        allowing = StubFence()
        adapter.fence = allowing
        try:
            await kind.writes[next(iter(kind.writes))](adapter)
            assert allowing.checks > 0
        finally:
            adapter.fence = None
        assert await kind.state(adapter, KEYS) != before, "a write the fence allowed changed nothing"

    @needs(Capability.PERSISTENT)
    @checks("store.discard.unflushed")
    async def test_discard_and_a_lost_lock_save_nothing_more(self, adapter):
        """(PERSISTENT) ``discard()`` drops what is not durable yet, in memory
        too, and a ``close()`` whose fence says the lock was lost saves nothing
        more: a new instance reads what it read before.

        Troubleshoot: a store that keeps writes until ``flush`` must forget them
        in ``_discard`` (reload what is saved); otherwise a writer that lost its
        lock saves them at its last flush or close, over the next writer's work.
        """
        kind = KINDS[self.contract_kind]
        await kind.put(adapter, "a")
        await adapter.flush()
        await kind.put(adapter, "b")
        saved = await _durable_state(adapter, kind)
        await adapter.discard()
        assert await kind.state(adapter, ["a", "b"]) == saved, "discard() kept unsaved writes in memory"
        assert await _durable_state(adapter, kind) == saved
        await kind.put(adapter, "n")
        saved = await _durable_state(adapter, kind, ["a", "n"])
        adapter.fence = StubFence(lost=True)
        try:
            await adapter.close()
        finally:
            adapter.fence = None
        reopened = type(adapter)(adapter.config)
        await reopened.open()
        try:
            got = await kind.state(reopened, ["a", "n"])
        finally:
            await reopened.close()
        await adapter.open()
        assert got == saved, f"close() after the lock was lost saved {got}; durable before: {saved}"


async def _durable_state(store: BaseStore, kind: Kind, keys: list[str] | None = None) -> Any:
    async with durable_view(store) as durable:
        return await kind.state(durable, keys or ["a", "b"])
