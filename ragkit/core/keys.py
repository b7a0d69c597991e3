"""Graph keys: the node id of an entity and the edge key of a relation."""

from __future__ import annotations

from ragkit.ids import normalize_name

Pair = tuple[str, str]
"""An edge's key: its two endpoint keys, in order."""


def entity_key(name: str) -> str:
    """The graph node id of an entity: its normalised name."""
    return normalize_name(name)


def relation_key(source: str, target: str) -> Pair:
    """Edges are undirected: the endpoints' keys in order."""
    a, b = entity_key(source), entity_key(target)
    return (a, b) if a <= b else (b, a)
