"""Hooks of the ``postgres`` entry point. Cheap to import: asyncpg is imported
only when a store opens."""

from ragkit.plugins import hookimpl


@hookimpl
def register_kv_stores(register):
    from ragkit_postgres.kv import PostgresKVStore

    register(PostgresKVStore)


@hookimpl
def register_doc_status_stores(register):
    from ragkit_postgres.doc_status import PostgresDocStatusStore

    register(PostgresDocStatusStore)


@hookimpl
def register_vector_stores(register):
    from ragkit_postgres.vector import PostgresVectorStore

    register(PostgresVectorStore)


@hookimpl
def register_graph_stores(register):
    from ragkit_postgres.graph import PostgresGraphStore

    register(PostgresGraphStore)
