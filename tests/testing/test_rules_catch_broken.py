"""Every rule a backend is likely to break is caught: for each broken adapter of
each kind's ``broken`` module (``RULE_BREAKERS``: one per rule, named by its
``violates``; gathered by ``ragkit.testing.contracts.base.broken``),
the matching contract, run exactly as a third party runs it (a subclass
with its own ``adapter`` fixture, in a pytest subprocess), fails in at least
one test that names that rule with ``@checks``, while the unbroken reference
adapter passes the same contract. And ``python -m ragkit.testing.contracts
--rules`` finds a test for every rule the protocol docstrings state.

One subprocess per contract runs every broken adapter of that contract (a
test class each) and the reference, without the differential state machines
(``test_suite_catches_broken.py`` runs those against the references): the
targeted tests must catch each defect by themselves.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ragkit.testing.contracts import CONTRACTS, CrossProtocolContract, LeaseContract
from ragkit.testing.contracts.base.broken import rule_breaker_groups, rule_breakers
from ragkit.testing.contracts.base.checks import protocol_rules
from ragkit.testing.contracts.base.contract import StoreContractBase, contract_test_names

HEADER = '''\
import pytest
from ragkit.protocols import StoreConfig
from ragkit.storage import NumpyVectorStore
from ragkit.testing.contracts import {contract}
'''

STORE_CLASS = '''
from {module} import {cls} as Subject{n}


class Test_{name}({contract}):
    @pytest.fixture
    async def adapter(self, tmp_path):
        store = Subject{n}(StoreConfig(namespace="contract", working_dir=tmp_path, dimension=16))
        await store.open()
        yield store
        await store.drop()
        await store.close()
'''

MODEL_CLASS = '''
from {module} import {cls} as Subject{n}


class Test_{name}({contract}):
    @pytest.fixture
    def adapter(self):
        return Subject{n}()
'''

CROSS_CLASS = '''
from {module} import {cls} as Subject{n}


class Test_{name}({contract}):
    @pytest.fixture
    def embedder(self):
        return Subject{n}()

    @pytest.fixture
    async def vector_store(self, embedder, tmp_path):
        store = NumpyVectorStore(StoreConfig(namespace="cross", working_dir=tmp_path, dimension=embedder.dimension))
        await store.open()
        yield store
        await store.drop()
        await store.close()
'''

LEASE_CLASS = '''
from {module} import {cls} as Subject{n}


class Test_{name}({contract}):
    @pytest.fixture
    def adapter(self):
        server = {{}}  # what the leases of one workspace share

        async def make():
            return Subject{n}(server)

        return make
'''

REFERENCE = "Reference"
ALL_CONTRACTS = {
    **{c.__name__: c for c in CONTRACTS.values()},
    "CrossProtocolContract": CrossProtocolContract,
    "LeaseContract": LeaseContract,
}


def _groups() -> dict[str, tuple[list[type], type]]:
    """contract name -> (broken adapters, reference)."""
    return {contract: (list(classes), ref) for contract, (classes, ref) in rule_breaker_groups().items()}


def _template(contract: str) -> str:
    if contract == "CrossProtocolContract":
        return CROSS_CLASS
    if contract == "LeaseContract":
        return LEASE_CLASS
    return STORE_CLASS if issubclass(ALL_CONTRACTS[contract], StoreContractBase) else MODEL_CLASS


def run_group(workdir: Path, contract: str, adapters: list[type], reference: type) -> dict[str, dict[str, str]]:
    """Run ``contract`` against each adapter (and the reference) in one pytest
    subprocess; returns class name -> {test name -> outcome}."""
    workdir.mkdir(parents=True, exist_ok=True)
    parts = [HEADER.format(contract=contract)]
    for n, cls in enumerate([reference, *adapters]):
        name = REFERENCE if n == 0 else cls.__name__
        parts.append(_template(contract).format(module=cls.__module__, cls=cls.__name__, n=n, name=name, contract=contract))
    test_file = workdir / "test_rules_subject.py"
    test_file.write_text("".join(parts), encoding="utf-8")
    report = workdir / "report.xml"
    cmd = [
        sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider",
        "-k", "not test_differential_state_machine", f"--junitxml={report}", "--rootdir", str(workdir),
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function", "-o", "junit_family=xunit2",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    env["CI"] = "1"
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=1200)
    assert report.exists(), f"pytest wrote no report:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    outcomes: dict[str, dict[str, str]] = {}
    rank = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}  # a test's worst case (parametrize)
    for case in ET.parse(report).getroot().iter("testcase"):
        cls = case.get("classname", "?").rsplit(".", 1)[-1].removeprefix("Test_")
        name = case.get("name", "?").split("[")[0]
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                if child.tag != "skipped":
                    break
        mine = outcomes.setdefault(cls, {})
        if rank[outcome] >= rank.get(mine.get(name, "passed"), 0):
            mine[name] = outcome
    outcomes["_output"] = {"tail": proc.stdout[-6000:]}
    return outcomes


@pytest.fixture(scope="module")
def group_runs(tmp_path_factory):
    cache: dict[str, dict[str, dict[str, str]]] = {}
    root = tmp_path_factory.mktemp("rule-runs")

    def get(contract: str) -> dict[str, dict[str, str]]:
        if contract not in cache:
            adapters, reference = _groups()[contract]
            cache[contract] = run_group(root / contract, contract, adapters, reference)
        return cache[contract]

    return get


def _tests_checking(contract: type, rule: str) -> set[str]:
    return {
        name for name in contract_test_names(contract)
        if rule in getattr(inspect.getattr_static(contract, name), "ragkit_rules", ())
    }


CASES = [(contract, cls) for contract, (classes, _) in _groups().items() for cls in classes]


@pytest.mark.parametrize("contract", sorted(_groups()))
def test_reference_passes_the_contract(group_runs, contract):
    """The unbroken reference passes every test of the contract, so the
    failures below are the defects' own."""
    runs = group_runs(contract)
    ref = runs.get(REFERENCE, {})
    failed = sorted(n for n, o in ref.items() if o in ("failed", "error"))
    assert ref and not failed, f"{contract} against the reference failed {failed}:\n{runs['_output']['tail']}"


@pytest.mark.parametrize("contract, adapter", CASES, ids=[f"{c}-{a.__name__}" for c, a in CASES])
def test_contract_catches_the_rule_breaker(group_runs, contract, adapter):
    rule = adapter.violates
    aimed = _tests_checking(ALL_CONTRACTS[contract], rule)
    assert aimed, f"no test of {contract} names [{rule}], which {adapter.__name__} breaks"
    runs = group_runs(contract)
    got = runs.get(adapter.__name__, {})
    caught = {n for n in aimed if got.get(n) == "failed"}
    assert caught, (
        f"{contract} did not catch {adapter.__name__} ({adapter.defect}, breaks [{rule}]): "
        f"tests naming the rule {sorted(aimed)} gave {[got.get(n) for n in sorted(aimed)]}\n{runs['_output']['tail']}"
    )
    if contract != "CrossProtocolContract":
        assert got.get("test_no_overrides_DO_NOT_OVERRIDE") == "passed"


FENCING_RULES = {
    "store.fence.checked", "store.discard.unflushed",
    "lease.renew.owner-only", "lease.release.owner-only", "lease.expiry",
}


def test_every_fencing_rule_has_a_breaker():
    """The writer lock's rules that a store or lease can get wrong each have one."""
    broken = {cls.violates for cls in rule_breakers()}
    assert FENCING_RULES - broken == set()


def test_every_breaker_breaks_a_stated_rule_and_names_its_defect():
    stated = protocol_rules()
    for cls in rule_breakers():
        assert cls.violates in stated, f"{cls.__name__} breaks [{cls.violates}], which no protocol docstring states"
        assert isinstance(cls.defect, str) and cls.defect and cls.__doc__


ISSUE_19_RULES = {
    "store.flush.durable", "store.keys.exact", "store.batch.large", "store.scan.complete-under-delete",
    "vector.query.min-score-inclusive", "vector.query.top-k", "vector.filter.types",
    "graph.upsert-edges.last-wins", "doc_status.list-page.last-page",
    "llm.model-id.identifies-outputs", "llm.concurrent.distinct", "llm.stream.concatenates",
    "embedder.model-id.identifies-outputs", "embedder.embed.duplicates", "embedder.embed.blank-nonzero",
    "embedder.embed.concurrent", "reranker.model-id.identifies-outputs", "reranker.scores.duplicates",
    "reranker.scores.blank", "reranker.scores.concurrent", "cross.reranker.order",
    "cross.embedder-vector.accepted",
}


def test_every_rule_added_has_a_breaker():
    broken = {cls.violates for cls in rule_breakers()}
    assert ISSUE_19_RULES - broken == set()


def test_rule_listing_finds_a_test_for_every_rule():
    """``python -m ragkit.testing.contracts --rules`` exits 0: every rule stated
    in a protocol docstring is named by a contract test, and no test names a
    rule nobody stated."""
    proc = subprocess.run(
        [sys.executable, "-m", "ragkit.testing.contracts", "--rules", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    listing = json.loads(proc.stdout)
    assert proc.returncode == 0, f"untested: {listing['untested']}, unknown: {listing['unknown']}"
    assert len(listing["rules"]) >= 60
    assert ISSUE_19_RULES <= set(listing["rules"])
    assert listing["rules"]["store.flush.durable"], listing["rules"]
    text = subprocess.run(
        [sys.executable, "-m", "ragkit.testing.contracts", "--rules"], capture_output=True, text=True, timeout=300
    )
    assert text.returncode == 0 and "[vector.query.min-score-inclusive]" in text.stdout
