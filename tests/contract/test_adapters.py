"""Every contract against every adapter registered in this environment.

One test class per (kind, adapter name) is generated from ``get_registry()``
(``TestKV_sqlite``, ``TestVector_numpy``, ...): installing a plugin makes this
module test its adapters with no new test file. Selection and the
RAGKIT_CONTRACT_REQUIRE check are described in ``conftest.py``.

Stores get ``StoreConfig(namespace="contract", workspace=<unique>,
working_dir=tmp_path, options=<contract options>, dimension=16 for vectors)``;
models get ``cls(<contract options>)``. The options are registered on the test
side (``ragkit.testing.contracts.options``), never on the adapter class.

A store adapter that offers a writer lease (overrides ``writer_lease()``) also
gets ``TestLease_<kind>_<name>``, the lease contract over leases from new
instances of one config (one per "process"); ``TestLease_file`` runs it
against the file lock the core uses when no store offers a lease.
"""

from __future__ import annotations

import inspect
import os
import re
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from ragkit._loop_thread import close_items  # the core's own closer, so adapters close as in use
from ragkit.core.lock import LOCK_FILENAME, FileLease
from ragkit.plugins import create_model, create_store, get_registry
from ragkit.plugins.registry import STORE_KINDS, AdapterInfo
from ragkit.protocols import BaseStore, StoreConfig
from ragkit.testing.contracts import CONTRACTS, LeaseContract

VECTOR_DIMENSION = 16
PREFIX = {
    "kv": "KV",
    "vector": "Vector",
    "graph": "Graph",
    "doc_status": "DocStatus",
    "llm": "LLM",
    "embedder": "Embedder",
    "reranker": "Reranker",
}


def class_name(kind: str, name: str) -> str:
    return f"Test{PREFIX[kind]}_{re.sub(r'[^0-9A-Za-z_]', '_', name)}"


def _config(info: AdapterInfo, tmp_path, options: dict) -> StoreConfig:
    """A fresh workspace of the adapter's kind, for one test."""
    return StoreConfig(
        namespace="contract",
        workspace=f"c{uuid.uuid4().hex[:12]}",
        working_dir=tmp_path,
        options=options,
        dimension=VECTOR_DIMENSION if info.kind == "vector" else None,
    )


def _store_fixture(info: AdapterInfo):
    @pytest_asyncio.fixture
    async def adapter(self, tmp_path, ragkit_adapter_options):
        config = _config(info, tmp_path, ragkit_adapter_options(info))
        store = create_store(info.kind, info.cls, config)
        await store.open()
        try:
            yield store
        finally:
            if not store.is_open:
                await store.open()
            try:
                await store.drop()
            finally:
                await store.close()

    return adapter


def offers_lease(info: AdapterInfo) -> bool:
    return info.kind in STORE_KINDS and info.cls.writer_lease is not BaseStore.writer_lease


def lease_class_name(info: AdapterInfo) -> str:
    return f"TestLease_{info.kind}_{re.sub(r'[^0-9A-Za-z_]', '_', info.name)}"


def _lease_fixture(info: AdapterInfo):
    @pytest_asyncio.fixture
    async def adapter(self, tmp_path, ragkit_adapter_options):
        config = _config(info, tmp_path, ragkit_adapter_options(info))
        opened = []

        async def make():
            store = create_store(info.kind, info.cls, config)
            await store.open()
            opened.append(store)
            return store.writer_lease()

        yield make
        for store in opened:
            await store.close()

    return adapter


class TestLease_file(LeaseContract):
    """The lease contract against the file lock (no store offers a lease)."""

    @pytest.fixture
    def adapter(self, tmp_path):
        async def make():
            return FileLease(tmp_path / "ws" / LOCK_FILENAME)

        return make


def _model_fixture(info: AdapterInfo):
    @pytest_asyncio.fixture
    async def adapter(self, ragkit_adapter_options):
        model = create_model(info.kind, info.cls, ragkit_adapter_options(info))
        yield model
        await close_items(model)

    return adapter


def _generate() -> dict[str, type]:
    classes: dict[str, type] = {}
    registry = get_registry()
    for kind, contract_cls in CONTRACTS.items():
        for info in registry.adapters(kind):
            name = class_name(kind, info.name)
            fixture = _store_fixture(info) if kind in STORE_KINDS else _model_fixture(info)
            classes[name] = type(
                name,
                (contract_cls,),
                {
                    "__module__": __name__,
                    "__doc__": f"{contract_cls.__name__} against {kind} adapter {info.name!r} ({info.source}).",
                    "adapter": fixture,
                    "ragkit_adapter_key": f"{kind}:{info.name}",
                    "ragkit_adapter_info": info,
                },
            )
    for info in [i for kind in STORE_KINDS for i in registry.adapters(kind) if offers_lease(i)]:
        name = lease_class_name(info)
        classes[name] = type(
            name,
            (LeaseContract,),
            {
                "__module__": __name__,
                "__doc__": f"LeaseContract against the writer lease of {info.kind} adapter {info.name!r}.",
                "adapter": _lease_fixture(info),
                "ragkit_adapter_key": f"{info.kind}:{info.name}",
                "ragkit_adapter_info": info,
            },
        )
    return classes


globals().update(_generate())


def test_required_adapters_are_installed():
    """Every adapter in RAGKIT_CONTRACT_REQUIRE (``kind:name,...``) is registered
    in this environment, so its contract classes above ran. CI sets it so that
    a plugin failing to install or load is a failure, not a silently shorter run.
    """
    raw = os.environ.get("RAGKIT_CONTRACT_REQUIRE", "")
    required = sorted({p.strip() for p in raw.split(",") if p.strip()})
    registry = get_registry()
    problems = []
    for key in required:
        kind, _, name = key.partition(":")
        if kind not in CONTRACTS or not name:
            problems.append(f"{key!r}: use kind:name with kind in {', '.join(CONTRACTS)}")
        elif name not in registry.names(kind):
            problems.append(f"{key}: not registered (installed {kind} adapters: {registry.names(kind)})")
    if problems:
        failed = [f"{p.name}: {p.error}" for p in registry.plugins if p.error]
        pytest.fail(
            "RAGKIT_CONTRACT_REQUIRE names adapters that are not available:\n  "
            + "\n  ".join(problems)
            + (f"\nplugins that failed to load:\n  " + "\n  ".join(failed) if failed else "")
        )


def test_selected_adapters_exist(pytestconfig):
    """Every entry of --ragkit-adapters / RAGKIT_CONTRACT_ADAPTERS names an
    installed adapter (or a kind): a typo must not silently run nothing."""
    raw = pytestconfig.getoption("ragkit_adapters", default=None) or os.environ.get(
        "RAGKIT_CONTRACT_ADAPTERS", ""
    )
    registry = get_registry()
    unknown = []
    for key in sorted({p.strip() for p in raw.split(",") if p.strip()}):
        kind, _, name = key.partition(":")
        if kind not in CONTRACTS or (name and name not in registry.names(kind)):
            unknown.append(key)
    assert not unknown, f"--ragkit-adapters/RAGKIT_CONTRACT_ADAPTERS name unknown adapters: {unknown}"


def test_every_registered_adapter_has_a_contract_class():
    """Each adapter of a kind with a contract got its generated class here."""
    registry = get_registry()
    expected = {class_name(k, i.name) for k in CONTRACTS for i in registry.adapters(k)}
    expected |= {lease_class_name(i) for k in STORE_KINDS for i in registry.adapters(k) if offers_lease(i)}
    generated = {n for n, v in globals().items() if isinstance(v, type) and hasattr(v, "ragkit_adapter_key")}
    assert expected == generated
    assert {"TestKV_sqlite", "TestVector_numpy", "TestGraph_networkx", "TestDocStatus_sqlite",
            "TestLLM_scripted", "TestEmbedder_hash", "TestReranker_overlap"} <= generated


def test_production_adapter_classes_hold_no_test_hooks():
    """Test hooks live on the test side: no registered adapter class (nor a
    class it inherits from outside ``ragkit.testing``) has or mentions
    ``contract_options``, and neither does any production module of the
    embedded stores or the first-party plugins (their ``testing`` modules
    register the options in the ``ragkit.testing`` entry-point group)."""
    hook = "contract_" + "options"  # spelled apart so that this file is not a match itself
    offenders = []
    for info in get_registry().all_adapters():
        for klass in info.cls.__mro__:
            if klass is object or klass.__module__.startswith("ragkit.testing"):
                continue
            if hook in vars(klass) or hook in inspect.getsource(klass):
                offenders.append(f"{info.kind}:{info.name} ({klass.__module__}.{klass.__qualname__})")
    root = Path(__file__).resolve().parents[2]
    modules = [*root.glob("ragkit/storage/*.py"), *root.glob("plugins/*/ragkit_*/*.py")]
    assert len(modules) > 20
    offenders += [
        str(m.relative_to(root)) for m in modules if m.name != "testing.py" and hook in m.read_text("utf-8")
    ]
    assert not offenders, f"{hook} on production code: {offenders}"
