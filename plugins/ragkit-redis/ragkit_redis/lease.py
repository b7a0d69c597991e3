"""The workspace's writer lease in Redis (rules: :mod:`ragkit.protocols.lease`).

One key per workspace, ``<prefix>:{<workspace>:lock}:writer``, holding the
holder's JSON (pid, host, since, a random token): taken with ``SET NX PX ttl``,
renewed by the holder's heartbeat and before each of its writes (the fence of
:mod:`ragkit.core.lock`), and released only by the holder, both by a Lua
compare-and-set on the whole value, so a holder whose lease expired (and was
taken by another) can neither extend nor delete the new holder's lease, and
learns from the renewal that it lost it.

Fencing token. Beside it, ``...:{<workspace>:lock}:fence`` counts the
acquisitions: ``acquire`` is one script that sets the lease and increments the
counter, and the holder's ``Holder.fence`` is the counter's new value. The
stores on the same server (``RedisStore.commit``) ``WATCH`` the counter around
each write's ``MULTI``/``EXEC`` and write only while it is still the holder's:
a holder stalled past its lease while another took it writes nothing, even a
request it had sent before the stall. The counter is never deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragkit.protocols.lease import Holder

if TYPE_CHECKING:
    from ragkit_redis.doc_status import RedisDocStatusStore

_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisLease:
    heartbeat = True

    def __init__(self, store: RedisDocStatusStore) -> None:
        self.store = store
        base = f"{store.options.key_prefix}:{{{store.workspace}:lock}}"
        self.key = f"{base}:writer".encode()
        self.fence_key = f"{base}:fence".encode()
        self.where = f"Redis {store._safe_url} key {self.key.decode()}"  # noqa: SLF001 - password hidden

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        async with self.store.errors("take the writer lease"):
            token = int(await self.store.client.eval(_ACQUIRE, 2, self.key, self.fence_key, holder.encode(), _ms(ttl)))
        holder.fence = token
        return token > 0

    async def holder(self) -> Holder | None:
        async with self.store.errors("read the writer lease"):
            return Holder.decode(await self.store.client.get(self.key))

    async def renew(self, holder: Holder, ttl: float) -> bool:
        async with self.store.errors("renew the writer lease"):
            return bool(await self.store.client.eval(_RENEW, 1, self.key, holder.encode(), _ms(ttl)))

    async def release(self, holder: Holder) -> None:
        async with self.store.errors("release the writer lease"):
            await self.store.client.eval(_RELEASE, 1, self.key, holder.encode())


    def same_server(self, url: str) -> bool:
        """Whether a store at ``url`` reaches this lease's server (and database)."""
        return url == self.store.options.url


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
