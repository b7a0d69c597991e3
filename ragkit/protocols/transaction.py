"""The transaction scope protocol: stores that write through one backend
transaction, so that a batch across them applies whole or not at all.

A store may return a ``TransactionScope`` from ``BaseStore.transaction_scope()``
(``None``, the default: its writes apply one call at a time, as before).
Stores returning the *same* object (by identity: stores of one database
connection pool) share it. ``Stores.atomic()`` (``ragkit.core.stores``)
enters each distinct scope once around a batch (the indexer's commit): inside,
every call of those stores made by this task, and by the tasks it starts, is
part of one transaction, committed when the block ends and rolled back when it
raises or the process dies. Writes of stores outside any scope (files, other
servers) are not undone; the pipeline's own recovery covers them as before.

What an adapter that offers a scope must do (no contract class checks these
yet; ragkit-postgres's own tests do, kill -9 included):

- Whole: a batch written inside ``transaction()`` is seen by every other
  connection either not at all or whole, also after a ``kill -9`` of the
  writing process at any point of the block.
- Reads its own writes: reads made inside the block (by the stores of the
  scope) see the block's writes.
- Nested: entering the scope again inside the block joins the running
  transaction (no new one, nothing committed early).
- Task-local: only the task that entered the block, and the tasks it starts
  inside, use the transaction; other tasks' calls (a query answered
  meanwhile) run outside it and see committed data only.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable


@runtime_checkable
class TransactionScope(Protocol):
    """A backend transaction that several stores write through (rules above)."""

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """One transaction around the ``async with`` block; joins a running one."""
        ...
