"""Graph keys: the node id of an entity and the edge key of a relation."""

from __future__ import annotations

from ragkit.ids import normalize_name

Pair = tuple[str, str]
"""An edge's key: its two endpoint keys, in order."""

MANUAL_DOC = "manual"
"""The document id manual chunks carry (``pipeline/edit.py``): they belong to no document."""
MANUAL_PREFIX = "manual-"
"""How a manual chunk's id starts. A manual chunk holds a fact asserted through
a graph edit; it has no access list, so, like a document without one, everyone
in the workspace may read it (``core/scope.py``)."""


def is_manual(chunk_id: str) -> bool:
    return chunk_id.startswith(MANUAL_PREFIX)


def entity_key(name: str) -> str:
    """The graph node id of an entity: its normalised name."""
    return normalize_name(name)


def relation_key(source: str, target: str) -> Pair:
    """Edges are undirected: the endpoints' keys in order."""
    a, b = entity_key(source), entity_key(target)
    return (a, b) if a <= b else (b, a)
