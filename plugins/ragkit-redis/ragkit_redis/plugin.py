"""Hooks of the ``redis`` entry point. Cheap to import: the client library is
imported only when a store opens."""

from ragkit.plugins import hookimpl


@hookimpl
def register_kv_stores(register):
    from ragkit_redis.kv import RedisKVStore

    register(RedisKVStore)


@hookimpl
def register_doc_status_stores(register):
    from ragkit_redis.doc_status import RedisDocStatusStore

    register(RedisDocStatusStore)
