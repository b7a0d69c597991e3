"""Counting what a store is asked, for tests of caches that must not ask.

A kept scope (``ragkit.core.scope.ReadableScopes``) is only worth having if a
query makes no full listing of the doc-status records while nothing changed;
these tests count the listings through the store's one listing hook, so they
hold for any adapter built on ``DocStatusStore``.
"""

from __future__ import annotations

from typing import Any


def count_listings(store: Any) -> list[int]:
    """Counts the store's record listings (its ``_list_page`` hook) from now on:
    ``counter[0]`` is the number so far (a list so that a test can reset it)."""
    calls = [0]
    hook = store._list_page

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return await hook(*args, **kwargs)

    store._list_page = counted
    return calls
