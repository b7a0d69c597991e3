"""The KV kind: what every ``KVStore`` adapter must do, in one place
(the normative text is ``ragkit.protocols.kv.KVStore``'s docstring).

- ``contract.py``: ``KVStoreContract``, built from one mixin per operation;
- ``edge_cases.py``: the rules backends break most (keys a collation would merge, batches past SQL parameter limits, scans under delete, ``flush()``);
- ``machine.py``: the differential state machine (on ``base.machine``);
- ``broken.py``: the deliberately broken KV adapters the self-test runs
  the contract against (``defect`` and ``violates`` doubles).
"""

from ragkit.testing.contracts.kv.contract import KVStoreContract

__all__ = ["KVStoreContract"]
