"""The vector kind: what every ``VectorStore`` adapter must do, in one place
(the normative text is ``ragkit.protocols.vector.VectorStore``'s docstring).

- ``contract.py``: ``VectorStoreContract``, built from one mixin per operation;
- ``query.py``: queries and metadata filters, and the brute-force reference;
- ``edge_cases.py``: the rules backends break most (the ``min_score`` boundary, ``top_k=0``, filters comparing ``"1"`` with ``1``, ...);
- ``machine.py``: the differential state machine (on ``base.machine``);
- ``broken.py``: the deliberately broken vector adapters the self-test runs
  the contract against (``defect`` and ``violates`` doubles).
"""

from ragkit.testing.contracts.vector.contract import VectorStoreContract

__all__ = ["VectorStoreContract"]
