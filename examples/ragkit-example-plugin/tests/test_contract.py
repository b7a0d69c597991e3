"""The whole KV contract against MemoryKVStore: this file is all an adapter needs."""

import pytest
from ragkit.protocols import StoreConfig
from ragkit.testing import KVStoreContract
from ragkit_example_plugin import MemoryKVStore


class TestMemoryKVStore(KVStoreContract):
    @pytest.fixture
    async def adapter(self, tmp_path):
        async with MemoryKVStore(StoreConfig(namespace="contract", working_dir=tmp_path)) as store:
            yield store  # fresh, empty and open
            await store.drop()
