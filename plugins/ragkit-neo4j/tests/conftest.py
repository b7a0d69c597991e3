"""Fixtures for ragkit-neo4j's own tests: a Bolt server at ``RAGKIT_NEO4J_URI``.

Start the stand-in with ``plugins/ragkit-neo4j/scripts/bolt-server start`` and
export ``RAGKIT_NEO4J_URI=$(plugins/ragkit-neo4j/scripts/bolt-server uri)``.
Without the variable the server tests skip; when ``RAGKIT_CONTRACT_REQUIRE``
names ``graph:neo4j`` (as CI does) they fail instead.
"""

from __future__ import annotations

import functools
import uuid

import pytest
import pytest_asyncio

from bolt_stub import BoltStub
from ragkit.protocols import StoreConfig
from ragkit.testing.contracts.options import required_options
from ragkit.testing.opened_stores import opened_stores
from ragkit_neo4j import Neo4jGraphStore
from ragkit_neo4j.testing import neo4j_options as server_options


@pytest.fixture
def neo4j_options() -> dict:
    return required_options(server_options, {"graph:neo4j"}, "a Bolt server")


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
    async with opened_stores() as open_store:
        yield functools.partial(open_store, Neo4jGraphStore)


@pytest_asyncio.fixture
async def graph(graphs, make_config) -> Neo4jGraphStore:
    return await graphs(make_config())


@pytest.fixture
def stub():
    """``stub(mode, rows=None, **options)``: a loopback ``BoltStub``
    (``bolt_stub.py``) answering as ``mode`` says, closed after the test."""
    made: list[BoltStub] = []

    def start(mode: str, rows=None, **options) -> BoltStub:
        made.append(BoltStub(mode, rows, **options))
        return made[-1]

    yield start
    for server in made:
        server.close()
