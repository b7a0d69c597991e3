"""The open/closed rule every store follows whatever its kind, written once
over ``base.kinds.KINDS`` ([store.closed.raises])."""

from __future__ import annotations

import pytest

from ragkit.errors import StoreClosedError
from ragkit.testing.contracts.base.checks import checks
from ragkit.testing.contracts.base.kinds import KINDS


class ClosedStoreTests:
    @checks("store.closed.raises")
    async def test_closed_store_raises_store_closed_error(self, adapter):
        """Using a store before ``open()`` or after ``close()`` raises
        ``StoreClosedError``; ``async with`` opens and closes it; a closed store
        opens again (and two instances are never open at once here).

        Troubleshoot: the protocol's public methods check this; a store that
        fails here replaces one (``@bypass_template``) without ``self._check_open()``
        first, or its ``_open``/``_close`` hooks leave a connection half made.
        """
        kind = KINDS[self.contract_kind]
        never_opened = type(adapter)(adapter.config)
        for name, read in kind.reads.items():
            with pytest.raises(StoreClosedError):
                await read(never_opened)
        with pytest.raises(StoreClosedError):
            await kind.put(never_opened, "a")
        await adapter.close()
        assert not adapter.is_open
        for name, read in kind.reads.items():
            with pytest.raises(StoreClosedError):
                await read(adapter)
        async with type(adapter)(adapter.config) as opened:
            assert opened.is_open
            await kind.put(opened, "a")
            await opened.drop()
        assert not opened.is_open
        with pytest.raises(StoreClosedError):
            await kind.size(opened)
        await adapter.open()
        assert adapter.is_open and await kind.size(adapter) == 0
