"""ragkit.testing.denied: the helper of the server plugins' error tests must
fail a case whose store does not refuse, and close the store either way."""

from __future__ import annotations

import pytest

from ragkit.errors import StoreError
from ragkit.testing.denied import OPEN, as_user, check_refusal, refusal


class _Store:
    def __init__(self, fail: str | None) -> None:
        self.fail, self.is_open, self.opens = fail, False, 0

    async def open(self) -> None:
        self.opens += 1
        if self.fail == "open":
            raise StoreError("failed to connect to redis://bob:****@h:1/0: NOPERM")
        self.is_open = True

    async def count(self) -> int:
        if self.fail == "count":
            raise StoreError("failed to count records at redis://bob:****@h:1/0: NOPERM")
        return 0

    async def close(self) -> None:
        self.is_open = False


async def test_the_refusal_is_returned_and_the_store_closed():
    store = _Store("count")
    message = await refusal(store, lambda s: s.count())
    check_refusal(message, "failed to count records", "bob")
    assert (store.opens, store.is_open) == (1, False)


async def test_an_open_case_opens_once():
    store = _Store("open")
    assert "failed to connect" in await refusal(store, OPEN)
    assert store.opens == 1


async def test_a_store_that_does_not_refuse_fails_the_case():
    store = _Store(None)
    with pytest.raises(AssertionError, match="succeeded as a user denied"):
        await refusal(store, lambda s: s.count())
    assert not store.is_open


def test_the_check_wants_the_words_and_the_masked_user_and_no_password():
    check_refusal("failed to read at pg://bob:****@h:5/d", "failed to read", "bob")
    for message in ("failed to write at pg://bob:****@h:5/d", "failed to read at pg://bob:s3cret-pw@h:5/d",
                    "failed to read at pg://bob:****@h:5/d s3cret-pw"):
        with pytest.raises(AssertionError):
            check_refusal(message, "failed to read", "bob")
    assert as_user("redis://old:pw@127.0.0.1:6379/2", "bob") == "redis://bob:s3cret-pw@127.0.0.1:6379/2"
