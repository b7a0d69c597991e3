"""The LLM kind: what every ``LLM`` adapter must do, in one place
(the normative text is ``ragkit.protocols.models.LLM``'s docstring).

- ``contract.py``: ``LLMContract``, built from one mixin per operation;
- ``edge_cases.py``: the rules models break most (``model_id``, concurrent calls, whitespace in streams);
- ``broken.py``: the deliberately broken LLM adapters the self-test runs
  the contract against (``defect`` and ``violates`` doubles).
"""

from ragkit.testing.contracts.llm.contract import LLMContract

__all__ = ["LLMContract"]
