"""The machinery every kind shares; an adapter author needs none of it
directly (subclass a contract and override its ``adapter`` fixture).

- ``contract.py``: ``ContractBase``, ``StoreContractBase``,
  ``ModelContractBase``, the ``@contract`` registration and ``CONTRACTS``,
  the capability gate (``needs``), the guard test and the store hygiene
  checks, and value helpers (``same``/``difference``, ``sibling``, ``reopened``);
- ``checks.py``: rule ids and ``@checks``;
- ``machine.py``: the differential state machines' base, written once
  (budget, event loop, and the rules every kind shares);
- ``broken.py``: the broken-adapter helpers (``MissingIdError``, gathering
  each kind's ``broken`` module for the self-test and the report);
- ``fencing.py``: ``FencingTests``, the writer lock's rules every store kind runs;
- ``inputs.py``: inputs that expose backend-shaped bugs;
- ``models.py``: what the three model contracts share (``model_id`` checks).
"""
