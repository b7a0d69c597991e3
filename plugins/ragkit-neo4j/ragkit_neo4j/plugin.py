"""Hooks of the ``neo4j`` entry point. Cheap to import: the driver is
imported only when a store is built."""

from ragkit.plugins import hookimpl


@hookimpl
def register_graph_stores(register):
    from ragkit_neo4j.graph import Neo4jGraphStore

    register(Neo4jGraphStore)
