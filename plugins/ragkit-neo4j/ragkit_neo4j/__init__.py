"""ragkit graph store ``neo4j``: Neo4j (and Bolt servers that speak enough of
it) through the official async driver. See README.md."""

from ragkit_neo4j.graph import Neo4jGraphStore, Neo4jOptions

__all__ = ["Neo4jGraphStore", "Neo4jOptions"]
__version__ = "0.1.0"
