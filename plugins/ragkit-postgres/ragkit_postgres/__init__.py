"""ragkit stores on PostgreSQL: KV, doc status, vectors (pgvector) and graph
``postgres``, on one asyncpg pool per database. See README.md."""

from ragkit_postgres._db import SCHEMA_VERSION, Database, PostgresOptions
from ragkit_postgres.doc_status import PostgresDocStatusStore
from ragkit_postgres.graph import PostgresGraphStore
from ragkit_postgres.kv import PostgresKVStore
from ragkit_postgres.lease import PostgresLease
from ragkit_postgres.vector import PostgresVectorStore

__all__ = [
    "SCHEMA_VERSION", "Database", "PostgresDocStatusStore", "PostgresGraphStore", "PostgresKVStore",
    "PostgresLease", "PostgresOptions", "PostgresVectorStore",
]
__version__ = "0.1.0"
