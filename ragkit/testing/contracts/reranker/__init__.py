"""The reranker kind: what every ``Reranker`` adapter must do, in one place
(the normative text is ``ragkit.protocols.models.Reranker``'s docstring).

- ``contract.py``: ``RerankerContract``, built from one mixin per operation;
- ``edge_cases.py``: the rules models break most (``model_id``, duplicates and blanks in one call, concurrent calls);
- ``broken.py``: the deliberately broken reranker adapters the self-test runs
  the contract against (``defect`` and ``violates`` doubles).
"""

from ragkit.testing.contracts.reranker.contract import RerankerContract

__all__ = ["RerankerContract"]
