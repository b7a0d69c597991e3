"""The doc-status kind: what every ``DocStatusStore`` adapter must do, in one place
(the normative text is ``ragkit.protocols.doc_status.DocStatusStore``'s docstring).

- ``contract.py``: ``DocStatusStoreContract``, built from one mixin per operation;
- ``records.py``: records as the tests write and compare them;
- ``changes.py``: the generation and the change feed (GENERATION);
- ``edge_cases.py``: the rules backends break most (the last page of a listing, batches past SQL parameter limits, ...);
- ``machine.py``: the differential state machine (on ``base.machine``);
- ``broken.py``: the deliberately broken doc-status adapters the self-test runs
  the contract against (``defect`` and ``violates`` doubles).
"""

from ragkit.testing.contracts.doc_status.contract import DocStatusStoreContract

__all__ = ["DocStatusStoreContract"]
