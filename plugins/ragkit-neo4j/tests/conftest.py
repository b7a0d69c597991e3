"""Fixtures for ragkit-neo4j's own tests: a Bolt server at ``RAGKIT_NEO4J_URI``.

Start the stand-in with ``plugins/ragkit-neo4j/scripts/bolt-server start`` and
export ``RAGKIT_NEO4J_URI=$(plugins/ragkit-neo4j/scripts/bolt-server uri)``.
Without the variable the server tests skip; when ``RAGKIT_CONTRACT_REQUIRE``
names ``graph:neo4j`` (as CI does) they fail instead.
"""

from __future__ import annotations

import os
import uuid

import pytest
import pytest_asyncio

from ragkit.protocols import StoreConfig
from ragkit_neo4j import Neo4jGraphStore
from ragkit_neo4j.testing import neo4j_options as server_options


@pytest.fixture
def neo4j_options() -> dict:
    try:
        return server_options()
    except pytest.skip.Exception as exc:
        if "graph:neo4j" in {p.strip() for p in os.environ.get("RAGKIT_CONTRACT_REQUIRE", "").split(",")}:
            pytest.fail(f"a Bolt server is required (RAGKIT_CONTRACT_REQUIRE) but: {exc.msg}")
        raise


@pytest.fixture
def make_config(neo4j_options):
    def make(namespace: str = "ns", workspace: str | None = None, **options) -> StoreConfig:
        return StoreConfig(
            namespace=namespace,
            workspace=workspace or f"t{uuid.uuid4().hex[:10]}",
            options={**neo4j_options, **options},
        )

    return make


@pytest_asyncio.fixture
async def graphs():
    """``await graphs(config)``: an opened store, dropped and closed after the test."""
    opened = []

    async def open_store(config):
        store = Neo4jGraphStore(config)
        await store.open()
        opened.append(store)
        return store

    yield open_store
    for store in reversed(opened):
        if not store.is_open:
            await store.open()
        await store.drop()
        await store.close()


@pytest_asyncio.fixture
async def graph(graphs, make_config) -> Neo4jGraphStore:
    return await graphs(make_config())
