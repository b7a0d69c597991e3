"""The writer lease: what every lease a store offers through ``writer_lease()``
must do (the normative text is ``ragkit.protocols.lease``'s docstring).

- ``contract.py``: ``LeaseContract``;
- ``broken.py``: ``MemoryLease`` (the reference) and the deliberately broken
  leases the self-test runs the contract against.
"""

from ragkit.testing.contracts.lease.contract import LeaseContract

__all__ = ["LeaseContract"]
