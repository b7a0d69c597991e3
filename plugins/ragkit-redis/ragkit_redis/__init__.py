"""ragkit stores on Redis: KV ``redis`` and doc status ``redis``, through
``redis.asyncio``. See README.md."""

from ragkit_redis._base import RedisOptions
from ragkit_redis.doc_status import RedisDocStatusStore
from ragkit_redis.kv import RedisKVStore

__all__ = ["RedisDocStatusStore", "RedisKVStore", "RedisOptions"]
__version__ = "0.1.0"
