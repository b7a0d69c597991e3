"""Fixtures for ragkit-postgres's own tests: a PostgreSQL with pgvector at
``RAGKIT_POSTGRES_URL``.

``scripts/test-services`` starts one (``plugins/ragkit-postgres/scripts/postgres-server``);
by hand: ``RAGKIT_POSTGRES_PORT=5433 plugins/ragkit-postgres/scripts/postgres-server start``
and export ``RAGKIT_POSTGRES_URL=$(RAGKIT_POSTGRES_PORT=5433 plugins/ragkit-postgres/scripts/postgres-server url)``.
Without the variable these tests skip; when ``RAGKIT_CONTRACT_REQUIRE`` names a
``postgres`` adapter (as CI does) they fail instead.
"""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio

from ragkit.protocols import StoreConfig
from ragkit.testing.contracts.options import required_options
from ragkit.testing.opened_stores import opened_stores
from ragkit_postgres.testing import postgres_options

KEYS = {"kv:postgres", "doc_status:postgres", "vector:postgres", "graph:postgres"}


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return required_options(postgres_options, KEYS, "PostgreSQL")["dsn"]


@pytest.fixture
def make_config(postgres_url):
    def make(namespace: str = "ns", workspace: str | None = None, dimension: int | None = None,
             **options) -> StoreConfig:
        return StoreConfig(namespace=namespace, workspace=workspace or f"t{uuid.uuid4().hex[:10]}",
                           dimension=dimension, options={"dsn": postgres_url, **options})

    return make


@pytest_asyncio.fixture
async def stores():
    """Opens stores for a test and drops and closes them afterwards."""
    async with opened_stores() as open_store:
        yield open_store
