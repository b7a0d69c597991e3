"""Fixtures for ragkit-redis's own tests: a Redis at ``RAGKIT_REDIS_URL``.

Start one with ``plugins/ragkit-redis/scripts/redis-server start`` and export
``RAGKIT_REDIS_URL=$(plugins/ragkit-redis/scripts/redis-server url)``. Without
the variable these tests skip; when ``RAGKIT_CONTRACT_REQUIRE`` names
``kv:redis`` or ``doc_status:redis`` (as CI does) they fail instead.
"""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio

from ragkit.protocols import StoreConfig
from ragkit.testing.contracts.options import required_options
from ragkit.testing.opened_stores import opened_stores
from ragkit_redis import RedisDocStatusStore, RedisKVStore
from ragkit_redis.testing import redis_options


@pytest.fixture
def redis_url() -> str:
    return required_options(redis_options, {"kv:redis", "doc_status:redis"}, "Redis")["url"]


@pytest.fixture
def make_config(redis_url):
    def make(namespace: str = "ns", workspace: str | None = None, **options) -> StoreConfig:
        return StoreConfig(
            namespace=namespace,
            workspace=workspace or f"t{uuid.uuid4().hex[:10]}",
            options={"url": redis_url, **options},
        )

    return make


@pytest_asyncio.fixture
async def stores():
    """Opens stores for a test and drops and closes them afterwards."""
    async with opened_stores() as open_store:
        yield open_store


@pytest_asyncio.fixture
async def kv(stores, make_config) -> RedisKVStore:
    return await stores(RedisKVStore, make_config("kvns"))


@pytest_asyncio.fixture
async def docs(stores, make_config) -> RedisDocStatusStore:
    return await stores(RedisDocStatusStore, make_config("docns"))
