"""The graph kind: what every ``GraphStore`` adapter must do, in one place
(the normative text is ``ragkit.protocols.graph.GraphStore``'s docstring).

- ``contract.py``: ``GraphStoreContract``, built from one mixin per operation;
- ``query.py``: scans, counts, subgraph and label search;
- ``edge_cases.py``: the rules backends break most (duplicate edges in one batch, scans under delete, ...);
- ``machine.py``: the differential state machine (on ``base.machine``);
- ``broken.py``: the deliberately broken graph adapters the self-test runs
  the contract against (``defect`` and ``violates`` doubles).
"""

from ragkit.testing.contracts.graph.contract import GraphStoreContract

__all__ = ["GraphStoreContract"]
