"""The contract suite: one test class per protocol, built from small mixins
(one per operation). It needs pytest, pytest-asyncio and hypothesis; importing
``ragkit.testing`` alone does not import any of them.

Using it for an adapter takes one class and one fixture::

    import pytest
    from ragkit.protocols import StoreConfig
    from ragkit.testing.contracts import KVStoreContract

    class TestMyKV(KVStoreContract):
        @pytest.fixture
        async def adapter(self, tmp_path):
            async with MyKV(StoreConfig(namespace="contract", working_dir=tmp_path)) as store:
                yield store          # fresh, empty and open
                await store.drop()   # nothing may outlive the test

The kit is filed by kind: everything an adapter of one kind must do is in
one package, ``ragkit.testing.contracts.<kind>`` (``kv``, ``vector``,
``graph``, ``doc_status``, ``llm``, ``embedder``, ``reranker``, ``lease``):
its contract class (``contract.py``, one mixin per operation), the rules
backends break most (``edge_cases.py``), its differential state machine
(``machine.py``, store kinds) and the deliberately broken adapters the
self-test runs it against (``broken.py``). ``cross`` holds the rules across
kinds, ``base`` the shared machinery, ``report`` the counts below. Import the
classes from this package; the module paths inside it may move.

Rules the classes enforce:

- ``adapter`` yields a fresh, empty, opened instance (a model instance for the
  model contracts) and drops/closes it afterwards. Stores are checked to be
  empty before each test, and a fresh instance over the same config must be
  empty after the fixture's teardown. Under pytest-asyncio's strict mode,
  decorate the fixture with ``@pytest_asyncio.fixture``.
- Tests of optional behaviour skip by themselves, with the message
  ``adapter does not declare Capability.X``, when the adapter's class does not
  declare the capability. Nothing else skips.
- ``test_no_overrides_DO_NOT_OVERRIDE`` fails when a contract test is removed
  or overridden without ``@pytest.mark.xfail(reason=...)``.
- The differential state machines (one per store kind) run
  ``RAGKIT_CONTRACT_EXAMPLES`` examples (default 25) of
  ``RAGKIT_CONTRACT_STEPS`` steps (default 30); with ``CI`` set they are
  derandomized (fixed seed, no example database).

Running every contract against every installed adapter (``tests/contract`` in
ragkit's repository) builds each adapter from its registered class. Embedded
adapters need nothing; an adapter that needs options to run (a server URL,
credentials from the environment) registers them on the test side, never on
its class: see ``ragkit.testing.contracts.options`` (a ``"kind:name"`` ->
``options(tmp_path)`` mapping in the ``ragkit.testing`` entry-point group). A
skip there means "backend unreachable"; adapters listed in
``RAGKIT_CONTRACT_REQUIRE=kind:name,...`` fail instead of skipping.

Every rule a protocol docstring states carries an id in brackets
(``[vector.query.min-score-inclusive]``) and every contract test names the
rules it checks with ``@checks(...)``; rules across protocols are checked by
``CrossProtocolContract`` (an embedder with a vector store), and the writer
lease's rules (``ragkit.protocols.lease``) by ``LeaseContract``, for stores
that offer ``writer_lease()``: its ``adapter`` fixture yields an async
factory of leases over one workspace, one per "process".

``python -m ragkit.testing.contracts`` prints how many tests each contract has;
``--rules`` lists rule -> tests and exits 1 when a rule has none.
"""

import pytest

# Third parties get pytest's detailed assertion messages from the contract
# modules too (they are not test files, so pytest would not rewrite them);
# a package name covers its modules.
pytest.register_assert_rewrite(
    "ragkit.testing.contracts.base",
    "ragkit.testing.contracts.cross",
    "ragkit.testing.contracts.doc_status",
    "ragkit.testing.contracts.embedder",
    "ragkit.testing.contracts.graph",
    "ragkit.testing.contracts.kv",
    "ragkit.testing.contracts.lease",
    "ragkit.testing.contracts.llm",
    "ragkit.testing.contracts.options",
    "ragkit.testing.contracts.reranker",
    "ragkit.testing.contracts.vector",
)

from ragkit.testing.contracts.base.checks import checks  # noqa: E402
from ragkit.testing.contracts.base.contract import (  # noqa: E402
    CONTRACTS,
    SKIP_PREFIX,
    contract_test_names,
    needs,
)
from ragkit.testing.contracts.base.machine import machine_budget  # noqa: E402
from ragkit.testing.contracts.cross import CrossProtocolContract  # noqa: E402
from ragkit.testing.contracts.doc_status import DocStatusStoreContract  # noqa: E402
from ragkit.testing.contracts.embedder import EmbedderContract  # noqa: E402
from ragkit.testing.contracts.graph import GraphStoreContract  # noqa: E402
from ragkit.testing.contracts.kv import KVStoreContract  # noqa: E402
from ragkit.testing.contracts.lease import LeaseContract  # noqa: E402
from ragkit.testing.contracts.llm import LLMContract  # noqa: E402
from ragkit.testing.contracts.options import contract_options  # noqa: E402
from ragkit.testing.contracts.reranker import RerankerContract  # noqa: E402
from ragkit.testing.contracts.vector import VectorStoreContract  # noqa: E402


def rule_listing() -> dict:
    """Every protocol rule -> the contract tests naming it (``report.rule_listing``)."""
    from ragkit.testing.contracts.report import rule_listing as listing

    return listing()


__all__ = [
    "CONTRACTS",
    "CrossProtocolContract",
    "DocStatusStoreContract",
    "EmbedderContract",
    "GraphStoreContract",
    "KVStoreContract",
    "LLMContract",
    "LeaseContract",
    "RerankerContract",
    "SKIP_PREFIX",
    "VectorStoreContract",
    "contract_options",
    "checks",
    "contract_test_names",
    "machine_budget",
    "needs",
    "rule_listing",
]
