"""The embedded default stores: no server, everything under ``working_dir``.

=====================  ==========  ===============================================
class                  name        on disk
=====================  ==========  ===============================================
SQLiteKVStore          sqlite      ``<working_dir>/<workspace>/ragkit.sqlite``
SQLiteDocStatusStore   sqlite      same file, its own table
SQLiteGraphStore       sqlite      same file, its tables ``graph_nodes`` and
                                   ``graph_edges`` (the default graph store)
NumpyVectorStore       numpy       ``<working_dir>/<workspace>/vectors/<ns>.npz``
                                   and ``<ns>.npz.journal`` (the default vector store)
USearchVectorStore     usearch     the SQLite file, its tables ``vectors``,
                                   ``vectors_gone`` and ``vectors_state``; the
                                   search graph cached in ``vectors/`` (for
                                   large workspaces: not held whole in memory)
NetworkXGraphStore     networkx    ``<working_dir>/<workspace>/graph/<ns>.json``
                                   and ``<ns>.json.journal`` (the default graph
                                   store before SQLiteGraphStore; kept by choice)
=====================  ==========  ===============================================

The two in-memory stores write a snapshot plus an append-only journal of what
each flush changed (``snapshot_journal.JournaledFile``), folded into a new snapshot when
the journal outgrows it and at ``close()``.
"""

from ragkit.storage.networkx_graph import NetworkXGraphStore
from ragkit.storage.numpy_vectors import NumpyVectorStore
from ragkit.storage.sqlite_doc_status import SQLiteDocStatusStore
from ragkit.storage.sqlite_graph import SQLiteGraphStore
from ragkit.storage.sqlite_kv import SQLiteKVStore
from ragkit.storage.usearch_vectors import USearchVectorStore  # usearch itself loads on first use

__all__ = [
    "NetworkXGraphStore",
    "NumpyVectorStore",
    "SQLiteDocStatusStore",
    "SQLiteGraphStore",
    "SQLiteKVStore",
    "USearchVectorStore",
]
