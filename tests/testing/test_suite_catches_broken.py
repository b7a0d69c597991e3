"""The contract suite catches broken adapters (and passes the built-in ones).

For each deliberately broken adapter in a kind's ``broken`` module (its
``DEFECTS``, gathered by ``ragkit.testing.contracts.base.broken``) the matching
contract class runs against it exactly as a third party would run it: a test
module (written into tmp_path) subclasses the contract and overrides the
``adapter`` fixture, and pytest runs it in a subprocess with a junit report.
The run must fail, and fail in the test aimed at that adapter's defect. The
control runs the unbroken built-in adapter through the same whole contract:
no failures, no errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ragkit.storage import (
    NetworkXGraphStore,
    NumpyVectorStore,
    SQLiteDocStatusStore,
    SQLiteKVStore,
)
from ragkit.testing.contracts.base.broken import defect_doubles
from ragkit.testing.contracts.graph import broken as graph_broken
from ragkit.testing.contracts.kv import broken as kv_broken
from ragkit.testing.contracts.vector import broken as vector_broken

# A small, derandomized state-machine budget (CI=1: fixed seed, no example
# database): the targeted tests must catch each defect by themselves.
ENV = {"RAGKIT_CONTRACT_EXAMPLES": "10", "RAGKIT_CONTRACT_STEPS": "25", "CI": "1"}
DIMENSION = 16  # the vector contract needs >= 4; ignored by other stores


@dataclass
class ContractRun:
    """Outcome of one pytest run of a contract against one adapter class."""

    adapter: type
    contract: str
    returncode: int
    output: str
    outcomes: dict[str, str] = field(default_factory=dict)  # test name -> passed/failed/error/skipped
    messages: dict[str, str] = field(default_factory=dict)  # junit message (skip reason)
    details: dict[str, str] = field(default_factory=dict)  # failure text: the traceback

    def named(self, outcome: str) -> set[str]:
        return {name for name, o in self.outcomes.items() if o == outcome}

    @property
    def failed(self) -> set[str]:
        return self.named("failed") | self.named("error")

    def base_names(self, outcome: str) -> set[str]:
        """Names without pytest parameter ids (``test_x[param]`` -> ``test_x``)."""
        return {name.split("[")[0] for name in self.named(outcome)}

    def summary(self) -> str:
        lines = [
            f"{self.contract} against {self.adapter.__name__}: exit {self.returncode}",
            *(f"  {o:7} {n}" for n, o in sorted(self.outcomes.items())),
        ]
        return "\n".join(lines) + "\n--- output tail ---\n" + self.output[-4000:]


MODULE = '''\
import pytest
from hypothesis import Phase, settings

from ragkit.protocols import StoreConfig
from ragkit.testing import {contract}
from {module} import {cls} as Subject

# Harness only: report a state machine's first counterexample without shrinking
# it (shrinking against a real store takes minutes); pass/fail is unchanged.
settings.register_profile("no-shrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("no-shrink")


class TestSubject({contract}):
    @pytest.fixture
    async def adapter(self, tmp_path):
        config = StoreConfig(namespace="contract", working_dir=tmp_path, dimension={dimension})
        store = Subject(config)
        await store.open()
        yield store
        await store.drop()
        await store.close()
'''


def run_contract(workdir: Path, adapter: type, contract: str) -> ContractRun:
    """Run the whole ``contract`` against ``adapter`` in a pytest subprocess."""
    workdir.mkdir(parents=True, exist_ok=True)
    test_file = workdir / "test_subject_contract.py"
    test_file.write_text(
        MODULE.format(
            contract=contract, module=adapter.__module__, cls=adapter.__name__,
            dimension=DIMENSION,
        ),
        encoding="utf-8",
    )
    report = workdir / "report.xml"
    cmd = [
        sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider",
        f"--junitxml={report}", "--rootdir", str(workdir),
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function",
        "-o", "junit_family=xunit2",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    env.update(ENV)
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    run = ContractRun(adapter, contract, proc.returncode, proc.stdout + proc.stderr)
    if not report.exists():
        pytest.fail(f"pytest wrote no report:\n{run.summary()}")
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "?")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                run.messages[name] = child.get("message") or ""
                run.details[name] = child.text or ""
                if child.tag != "skipped":
                    break
        run.outcomes[name] = outcome
    return run


@pytest.fixture(scope="module")
def contract_runs(tmp_path_factory):
    """Runs cached per (adapter, contract) for this module."""
    cache: dict[tuple[type, str], ContractRun] = {}
    root = tmp_path_factory.mktemp("contract-runs")

    def get(adapter: type, contract: str) -> ContractRun:
        key = (adapter, contract)
        if key not in cache:
            cache[key] = run_contract(root / f"run{len(cache)}", adapter, contract)
        return cache[key]

    return get


# -- what must catch what ------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    adapter: type
    contract: str
    catches: frozenset[str]
    """Contract tests aimed at the defect (names without parameter ids): each must fail."""
    message: str | None
    """Text that at least one of those failures' tracebacks contains (``None``: not checked)."""

    @property
    def id(self) -> str:
        return self.adapter.__name__


def case(adapter: type, contract: str, catches: list[str], message: str | None) -> Case:
    return Case(adapter, contract, frozenset(catches), message)


FILTER_TESTS = [
    "test_filter_equality",
    "test_filter_in",
    "test_filter_requires_every_condition",
    "test_filter_on_a_missing_field_never_matches",
    "test_filter_tells_bool_from_int",
    "test_filter_applies_before_top_k",
]

# Every run is of the whole contract: each takes about two seconds.
CASES = [
    case(kv_broken.ReversedBatchKVStore, "KVStoreContract",
         ["test_get_many_keeps_order_duplicates_and_none"], "differs from what was written"),
    case(kv_broken.MergingUpsertKVStore, "KVStoreContract",
         # The contract modules are not assertion-rewritten, and this assert has no
         # message of its own: the traceback only says "AssertionError".
         ["test_upsert_replaces_whole_record"], None),
    case(kv_broken.StrictDeleteKVStore, "KVStoreContract",
         ["test_delete_missing_keys_is_not_an_error"], "cannot delete missing"),
    case(vector_broken.StrictDeleteVectorStore, "VectorStoreContract",
         ["test_delete_missing_ids_is_not_an_error"], "cannot delete missing"),
    case(vector_broken.IgnoresFilterVectorStore, "VectorStoreContract", FILTER_TESTS, "filter="),
    case(graph_broken.StrictDeleteGraphStore, "GraphStoreContract",
         ["test_deleting_missing_things_is_not_an_error"], "cannot delete missing"),
    case(graph_broken.DuplicateEdgesGraphStore, "GraphStoreContract",
         ["test_scans_yield_everything_once"], "not canonical"),
    case(graph_broken.StaleDegreeGraphStore, "GraphStoreContract",
         ["test_degree_after_every_mutation"], "degrees: expected"),
    case(graph_broken.MissingNodeEmptyEdgesGraphStore, "GraphStoreContract",
         ["test_nodes_edges_tells_missing_from_isolated"], "== [None, [], "),
]

CONTROLS = [
    (SQLiteKVStore, "KVStoreContract"),
    (NumpyVectorStore, "VectorStoreContract"),
    (NetworkXGraphStore, "GraphStoreContract"),
    (SQLiteDocStatusStore, "DocStatusStoreContract"),
]


@pytest.mark.parametrize("adapter, contract", CONTROLS, ids=[c[0].__name__ for c in CONTROLS])
def test_control_builtin_passes_whole_contract(contract_runs, adapter, contract):
    run = contract_runs(adapter, contract)
    assert run.returncode == 0 and not run.failed, run.summary()
    assert len(run.named("passed")) >= 20, run.summary()
    assert "test_differential_state_machine" in run.named("passed"), run.summary()
    # Only capability gates may skip, and the built-ins declare what they test.
    for name in run.named("skipped"):
        assert run.messages[name].startswith("adapter does not declare Capability."), run.summary()


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_contract_catches_broken_adapter(contract_runs, c: Case):
    run = contract_runs(c.adapter, c.contract)
    assert run.returncode == 1 and run.failed, (
        f"{c.contract} did not fail against {c.id} ({c.adapter.defect}):\n{run.summary()}"
    )
    caught = run.base_names("failed")  # assertion failures in the test itself, not fixture errors
    missed = sorted(c.catches - caught)
    assert not missed, (
        f"{c.contract} did not catch {c.id} ({c.adapter.defect}) in {missed}:\n{run.summary()}"
    )
    details = [t for name, t in run.details.items() if name.split("[")[0] in c.catches]
    assert c.message is None or any(c.message in t for t in details), (
        f"no failure of {sorted(c.catches)} mentions {c.message!r}:\n" + "\n".join(details)
    )
    # The suite's own guard and canaries pass: the failures are the defect's, not the harness's.
    for name in ("test_no_overrides_DO_NOT_OVERRIDE", "test_aaa_store_is_empty"):
        assert run.outcomes.get(name) == "passed", run.summary()


def test_every_broken_adapter_is_checked():
    checked = {c.adapter for c in CASES}
    listed = {cls for classes in defect_doubles().values() for cls in classes}
    assert listed == checked, sorted(cls.__name__ for cls in listed ^ checked)
    for cls in listed:
        assert isinstance(cls.defect, str) and cls.defect
        assert cls.__doc__ and cls.__doc__.strip()
        assert not cls.__module__.startswith("ragkit.storage")


def test_broken_adapters_are_not_registered():
    from ragkit.plugins import get_registry

    registered = {info.cls for info in get_registry().all_adapters()}
    listed = {cls for classes in defect_doubles().values() for cls in classes}
    assert not registered & listed
