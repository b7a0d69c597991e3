"""``CrossProtocolContract`` for every embedder x vector store pair registered
in this environment (``TestCross_<embedder>__<vector>``): an embedder's rows,
blank texts included, must be accepted and found by every vector store.
Options, selection and the RAGKIT_CONTRACT_REQUIRE policing are those of
``test_adapters.py`` and ``conftest.py`` (the class is keyed by its vector store)."""

from __future__ import annotations

import re
import uuid

import pytest_asyncio

from ragkit._loop_thread import close_items  # the core's own closer, so adapters close as in use
from ragkit.plugins import create_model, create_store, get_registry
from ragkit.protocols import StoreConfig
from ragkit.testing.contracts import CrossProtocolContract


def _fixtures(embedder_info, vector_info):
    @pytest_asyncio.fixture
    async def embedder(self, ragkit_adapter_options):
        model = create_model("embedder", embedder_info.cls, ragkit_adapter_options(embedder_info))
        yield model
        await close_items(model)

    @pytest_asyncio.fixture
    async def vector_store(self, embedder, tmp_path, ragkit_adapter_options):
        config = StoreConfig(
            namespace="cross",
            workspace=f"x{uuid.uuid4().hex[:12]}",
            working_dir=tmp_path,
            options=ragkit_adapter_options(vector_info),
            dimension=embedder.dimension,
        )
        store = create_store("vector", vector_info.cls, config)
        await store.open()
        try:
            yield store
        finally:
            try:
                await store.drop()
            finally:
                await store.close()

    return embedder, vector_store


def _name(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def _generate() -> dict[str, type]:
    registry = get_registry()
    classes = {}
    for e in registry.adapters("embedder"):
        for v in registry.adapters("vector"):
            name = f"TestCross_{_name(e.name)}__{_name(v.name)}"
            embedder, vector_store = _fixtures(e, v)
            classes[name] = type(name, (CrossProtocolContract,), {
                "__module__": __name__,
                "__doc__": f"embedder {e.name!r} with vector store {v.name!r}",
                "embedder": embedder,
                "vector_store": vector_store,
                "ragkit_adapter_key": f"vector:{v.name}",
            })
    return classes


globals().update(_generate())


def test_every_pair_has_a_class():
    registry = get_registry()
    want = {f"TestCross_{_name(e.name)}__{_name(v.name)}" for e in registry.adapters("embedder") for v in registry.adapters("vector")}
    assert want and want <= set(globals())
