"""The pure merge in ragkit.core.extraction is what the index side's Merger
builds on (adding only LLM summaries) and what a scoped query recomputes
descriptions with: without an LLM, or below the summary thresholds, the two
give the same node and edge properties."""

from __future__ import annotations

from ragkit.core.extraction import Fragment, entity_properties, relation_properties
from ragkit.core.keys import entity_key, relation_key
from ragkit.pipeline.merge import Merger
from ragkit.schema import Entity, Relation
from ragkit.sections.index import MergeConfig
from ragkit.tokenizer import TiktokenTokenizer

FRAGMENTS = [
    Fragment("c2", Entity(name="Gu Yao", type="Person", description="Leads Project Haijia.\n  Joined in 2019. ")),
    Fragment("c1", Entity(name="gu yao", type="person", description="Joined in 2019.")),
    Fragment("c3", Entity(name="Gu Yao", type="engineer", description="")),
]
EDGES = [
    Fragment("c1", Relation(source="Gu Yao", target="Project Haijia", keywords="leads, manages",
                            description="Gu Yao leads it.", strength=2.0)),
    Fragment("c2", Relation(source="project haijia", target="GU YAO", keywords="leads",
                            description="Gu Yao leads it.\nSince 2020.")),
]


async def test_merger_without_a_summary_is_the_pure_merge():
    merger = Merger(None, TiktokenTokenizer(), MergeConfig())
    key = entity_key("Gu Yao")
    props = entity_properties(key, FRAGMENTS)
    assert props == await merger.entity(key, FRAGMENTS)
    assert props == {"name": "Gu Yao", "type": "person", "source_ids": ["c1", "c2", "c3"],
                     "description": "Joined in 2019.\nLeads Project Haijia."}
    pair = relation_key("Gu Yao", "Project Haijia")
    edge = relation_properties(pair, EDGES)
    assert edge == await merger.relation(pair, EDGES)
    # Endpoints in key order, each named by the majority of how fragments wrote it (ties: the smallest).
    assert (edge["source"], edge["target"], edge["keywords"], edge["weight"]) == (
        "GU YAO", "Project Haijia", "leads, manages", 3.0)
    assert edge["description"] == "Gu Yao leads it.\nSince 2020."
