"""The embedder kind: what every ``Embedder`` adapter must do, in one place
(the normative text is ``ragkit.protocols.models.Embedder``'s docstring).

- ``contract.py``: ``EmbedderContract``, built from one mixin per operation;
- ``edge_cases.py``: the rules models break most (``model_id``, duplicates and blanks in one call, concurrent calls);
- ``broken.py``: the deliberately broken embedder adapters the self-test runs
  the contract against (``defect`` and ``violates`` doubles).
"""

from ragkit.testing.contracts.embedder.contract import EmbedderContract

__all__ = ["EmbedderContract"]
