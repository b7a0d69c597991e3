"""The contract suite's own machinery: lazy import, the counting command, the
guard test, the capability gate, fixture hygiene and canary order.

(Whether the contracts catch broken *adapters* is tests/testing/'s job.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragkit.plugins.registry import KINDS
from ragkit.protocols import Capability
from ragkit.testing.contracts import (
    CONTRACTS,
    KVStoreContract,
    SKIP_PREFIX,
    contract_test_names,
)
from ragkit.testing.contracts.base.contract import GUARD_TEST, StoreContractBase, require

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") and k != "CI"}
    env.update(extra)
    return env


def _run(*args: str, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=300
    )


def test_importing_ragkit_testing_needs_no_pytest():
    """``import ragkit.testing`` (the doubles) imports neither pytest nor
    hypothesis; asking for a contract class loads them lazily."""
    code = (
        "import sys, ragkit.testing as t\n"
        "print(sorted(m for m in ('pytest', 'hypothesis', 'pytest_asyncio') if m in sys.modules))\n"
        "t.KVStoreContract\n"
        "print('pytest' in sys.modules)\n"
    )
    out = _run("-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_every_kind_with_a_protocol_has_a_contract():
    """One contract class per protocol kind of the registry (tokenizers have none)."""
    assert list(CONTRACTS) == [k for k in KINDS if k not in ("tokenizer", "chunker", "query_mode", "loader")]


def test_counts_command():
    """``python -m ragkit.testing.contracts`` counts tests per contract without
    an adapter and reports the state machines' budget from the environment."""
    out = _run("-m", "ragkit.testing.contracts", "--json", RAGKIT_CONTRACT_EXAMPLES="7",
               RAGKIT_CONTRACT_STEPS="11", CI="1")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    counts = {c["contract"]: c["tests"] for c in data["contracts"]}
    assert counts == {cls.__name__: len(contract_test_names(cls)) for cls in CONTRACTS.values()}
    assert data["total_tests"] == sum(counts.values())
    sm = data["state_machines"]
    assert (sm["examples"], sm["steps"], sm["derandomize"]) == (7, 11, True)
    assert sm["kinds"] == ["kv", "vector", "graph", "doc_status"]
    text = _run("-m", "ragkit.testing.contracts")
    assert text.returncode == 0 and "KVStoreContract" in text.stdout and "RAGKIT_CONTRACT_STEPS" in text.stdout


@pytest.mark.parametrize("contract", list(CONTRACTS.values()), ids=lambda c: c.__name__)
def test_every_test_says_what_it_checks_and_how_to_troubleshoot(contract):
    """Each contract test has a docstring: what it checks, then how to
    troubleshoot a failure (canaries and the guard included)."""
    undocumented = []
    for name in contract_test_names(contract):
        doc = getattr(contract, name).__doc__ or ""
        if len(doc.strip()) < 40 or "Troubleshoot" not in doc:
            undocumented.append(name)
    assert not undocumented, f"{contract.__name__}: tests without what/troubleshoot docstrings: {undocumented}"


@pytest.mark.parametrize("contract", list(CONTRACTS.values()), ids=lambda c: c.__name__)
def test_every_contract_has_the_guard_and_canaries(contract):
    names = contract_test_names(contract)
    assert GUARD_TEST in names
    if issubclass(contract, StoreContractBase):
        assert {"test_aaa_store_is_empty", "test_zzz_store_is_still_empty", "test_differential_state_machine"} <= set(names)
        # test_zzz lives on the contract class itself, so pytest collects it after every mixin.
        assert "test_zzz_store_is_still_empty" in vars(contract)


def test_guard_flags_removed_and_overridden_tests():
    """The guard passes an unchanged subclass and one whose override is marked
    xfail with a reason; it fails removed tests, plain overrides and an
    un-overridden ``adapter`` fixture."""

    @pytest.fixture
    def adapter():  # pragma: no cover - never run
        yield None

    class Fine(KVStoreContract):
        pass

    Fine.adapter = adapter

    class KnownGap(Fine):
        @pytest.mark.xfail(reason="tracked in #123")
        async def test_get_single_key(self, adapter):
            raise AssertionError

    class Cheating(Fine):
        async def test_get_single_key(self, adapter):
            pass

        test_upsert_inserts = None

        @pytest.mark.xfail
        async def test_delete_removes_keys(self, adapter):
            pass

        async def describe_contents(self, store):
            return ""

    class NoFixture(KVStoreContract):
        pass

    Fine().test_no_overrides_DO_NOT_OVERRIDE()
    KnownGap().test_no_overrides_DO_NOT_OVERRIDE()
    with pytest.raises(pytest.fail.Exception) as exc:
        Cheating().test_no_overrides_DO_NOT_OVERRIDE()
    message = str(exc.value)
    assert "test_get_single_key is overridden" in message
    assert "test_upsert_inserts was removed" in message
    assert "test_delete_removes_keys is overridden" in message  # xfail without a reason
    assert "describe_contents (the suite's own checking machinery) is overridden" in message
    with pytest.raises(pytest.fail.Exception, match="`adapter` fixture is not overridden"):
        NoFixture().test_no_overrides_DO_NOT_OVERRIDE()


def test_capability_gate_skip_message():
    """A missing capability skips with a message naming it; a declared one does not."""

    class Plain:
        capabilities = frozenset({Capability.STREAMING})

    require(Plain(), Capability.STREAMING)
    with pytest.raises(pytest.skip.Exception) as exc:
        require(Plain(), Capability.PERSISTENT)
    assert exc.value.msg == f"{SKIP_PREFIX}PERSISTENT" == "adapter does not declare Capability.PERSISTENT"


HYGIENE_MODULE = '''
import pytest
from ragkit.protocols import StoreConfig
from ragkit.storage import SQLiteKVStore
from ragkit.testing import KVStoreContract


class TestDirty(KVStoreContract):
    @pytest.fixture
    async def adapter(self, tmp_path):
        async with SQLiteKVStore(StoreConfig(namespace="c", working_dir=tmp_path)) as store:
            await store.upsert({"left": {"over": True}})
            yield store
            await store.drop()


class TestLeaky(KVStoreContract):
    @pytest.fixture
    async def adapter(self, tmp_path):
        async with SQLiteKVStore(StoreConfig(namespace="c", working_dir=tmp_path)) as store:
            yield store  # no drop: the data stays in tmp_path's database


class TestClean(KVStoreContract):
    @pytest.fixture
    async def adapter(self, tmp_path):
        async with SQLiteKVStore(StoreConfig(namespace="c", working_dir=tmp_path)) as store:
            yield store
            await store.drop()
'''


def test_fixture_hygiene_is_enforced(tmp_path):
    """A fixture yielding a non-empty store errors at setup; one that leaves
    data behind errors at teardown (a fresh instance sees it); a clean one
    passes. Runs pytest in a subprocess, as an adapter author would."""
    (tmp_path / "test_hygiene.py").write_text(textwrap.dedent(HYGIENE_MODULE), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    out = _run("-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-k",
               "test_upsert_inserts or test_get_single_key", "test_hygiene.py", cwd=tmp_path,
               COLUMNS="400")
    lines = [line for line in out.stdout.splitlines() if line.startswith(("PASSED", "ERROR", "FAILED"))]
    summary = "\n".join(lines)
    for test in ("test_upsert_inserts", "test_get_single_key"):
        assert f"ERROR test_hygiene.py::TestDirty::{test} - Failed: the `adapter` fixture yielded a store that is not empty" in summary, out.stdout[-3000:]
        assert f"ERROR test_hygiene.py::TestLeaky::{test} - Failed: after the `adapter` fixture's teardown" in summary, out.stdout[-3000:]
        assert f"PASSED test_hygiene.py::TestClean::{test}" in summary
    assert not [line for line in lines if "FAILED" in line or "TestClean" in line and "ERROR" in line]


def test_canaries_run_first_and_last():
    """In every generated store class, ``test_aaa_store_is_empty`` is collected
    before every other contract test except the guard, and
    ``test_zzz_store_is_still_empty`` after all of them."""
    out = _run("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               str(HERE / "test_adapters.py"))
    assert out.returncode == 0, out.stdout + out.stderr
    by_class: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        parts = line.split("::")
        if len(parts) == 3:
            by_class.setdefault(parts[1], []).append(parts[2].split("[")[0])
    stores = [c for c in by_class if c.startswith(("TestKV_", "TestVector_", "TestGraph_", "TestDocStatus_"))]
    assert len(stores) >= 4, sorted(by_class)
    for cls in stores:
        tests = by_class[cls]
        assert tests[:2] == [GUARD_TEST, "test_aaa_store_is_empty"], (cls, tests[:3])
        assert tests[-1] == "test_zzz_store_is_still_empty", (cls, tests[-3:])
