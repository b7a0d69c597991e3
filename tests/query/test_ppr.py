"""The ``ppr`` mode: the PageRank itself against the linear system it solves,
the neighbourhood read through the graph protocol, and the second hop of a
multi-hop question that one-hop modes miss."""

from __future__ import annotations

import numpy as np
import pytest

from ragkit.protocols import StoreConfig
from ragkit.query import ppr
from ragkit.query.search import Searcher
from ragkit.storage import NetworkXGraphStore
from ragkit.testing import ScriptedLLM

from .conftest import make_rag


def closed_form(nodes, edges, seeds, damping):
    """Solve s = d (A s + r (dangling . s)) + (1 - d) r directly."""
    n, index = len(nodes), {k: i for i, k in enumerate(nodes)}
    adjacency = np.zeros((n, n))
    for a, b in edges:
        adjacency[index[a], index[b]] = adjacency[index[b], index[a]] = 1
    degree = adjacency.sum(axis=0)
    walk = np.divide(adjacency, degree, out=np.zeros_like(adjacency), where=degree > 0)  # column-stochastic
    r = np.array([seeds.get(k, 0.0) for k in nodes])
    r /= r.sum()
    dangling = (degree == 0).astype(float)
    system = np.eye(n) - damping * walk - damping * np.outer(r, dangling)
    return dict(zip(nodes, np.linalg.solve(system, (1 - damping) * r)))


@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_pagerank_is_the_solution_of_its_linear_system(damping):
    nodes = ["a", "b", "c", "d", "e", "lonely"]
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "c"), ("d", "e")]
    seeds = {"a": 2.0, "lonely": 1.0}
    got = ppr.personalized_pagerank(nodes, edges, seeds, damping)
    want = closed_form(nodes, edges, seeds, damping)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-9)
    for key in nodes:
        assert got[key] == pytest.approx(want[key], abs=1e-7), key
    # Nearer the heavier seed scores higher; a node with no path from a seed scores only via restarts.
    assert got["b"] > got["d"] > got["e"]


def test_no_usable_seed_gives_no_scores():
    assert ppr.personalized_pagerank(["a"], [], {"zz": 1.0}) == {}
    assert ppr.personalized_pagerank(["a"], [], {"a": 0.0}) == {}
    assert ppr.personalized_pagerank([], [], {"a": 1.0}) == {}


def test_seeds_weigh_similarity_by_specificity_and_chunks_share_an_entitys_score():
    weights = ppr.seed_weights([("hub", 0.9, 30, 1.0), ("rare", 0.6, 1, 1.0), ("rare", 0.8, 1, 1.0),
                                ("neg", -0.2, 1, 1.0), ("off", 0.9, 1, 0.5), ("against", 0.9, 1, -0.1)])
    assert weights == {"hub": pytest.approx(0.03), "rare": pytest.approx(0.8), "neg": 0.0,
                       "off": pytest.approx(0.9 * 0.5 ** ppr.RELEVANCE_EXPONENT), "against": 0.0}
    ranked = ppr.chunk_scores({"x": 0.6, "y": 0.2}, {"x": ["c1", "c2", "c2"], "y": ["c2"]})
    assert ranked == [("c2", pytest.approx(0.5)), ("c1", pytest.approx(0.3))]


async def test_neighbourhood_reads_hops_through_the_graph_protocol(tmp_path):
    graph = NetworkXGraphStore(StoreConfig(namespace="g", working_dir=tmp_path))
    await graph.open()
    chain = ["a", "b", "c", "d", "e"]
    await graph.upsert_nodes({k: {"entity_type": "x"} for k in [*chain, "side"]})
    await graph.upsert_edges([(x, y, {"weight": 1.0}) for x, y in zip(chain, chain[1:])] + [("b", "side", {})])
    nodes, edges = await ppr.neighbourhood(graph, ["a"], hops=2)
    assert nodes[0] == "a" and set(nodes) == {"a", "b", "c", "side"}
    assert set(edges) == {("a", "b"), ("b", "c"), ("b", "side")}  # (c, d) leaves the neighbourhood
    capped, _ = await ppr.neighbourhood(graph, ["a"], hops=4, max_nodes=3)
    assert len(capped) == 3
    await graph.close()


EXTRACTIONS = {
    "Climate Dynamics is": (
        "entity<|#|>Climate Dynamics<|#|>work<|#|>Climate Dynamics is a journal.\n"
        "entity<|#|>Springer<|#|>organization<|#|>Springer publishes Climate Dynamics.\n"
        "relation<|#|>Climate Dynamics<|#|>Springer<|#|>publisher<|#|>Springer publishes Climate Dynamics.\n"
    ),
    "Springer was founded": (
        "entity<|#|>Springer<|#|>organization<|#|>Springer is a publisher.\n"
        "entity<|#|>Julius Springer<|#|>person<|#|>Julius Springer founded Springer.\n"
        "relation<|#|>Julius Springer<|#|>Springer<|#|>founder<|#|>Julius Springer founded Springer in Berlin.\n"
    ),
}


def distractor(i: int) -> tuple[str, str]:
    text = f"Lake {i} lies in Province {i}; its fish are studied by Institute {i}."
    rows = (
        f"entity<|#|>Lake {i}<|#|>location<|#|>Lake {i} is a lake.\n"
        f"entity<|#|>Institute {i}<|#|>organization<|#|>Institute {i} studies fish.\n"
        f"relation<|#|>Institute {i}<|#|>Lake {i}<|#|>study<|#|>Institute {i} studies Lake {i}.\n"
    )
    return text, rows


def springer_and_lakes(lakes: int) -> tuple[list[str], ScriptedLLM]:
    """The journal, its publisher's founder and ``lakes`` unrelated passages, with their extractions."""
    docs = ["Climate Dynamics is a journal published by Springer.",
            "Springer was founded by Julius Springer in Berlin in 1842."]
    script = dict(EXTRACTIONS)
    for i in range(lakes):
        text, rows = distractor(i)
        docs.append(text)
        script[text[:12]] = rows
    return docs, scripted(script)


def scripted(script: dict[str, str]) -> ScriptedLLM:
    """Extraction rows by a needle of the chunk's text; no keywords."""

    def answer(request):
        if request.role == "extraction":
            return next((rows for needle, rows in script.items() if needle in request.prompt), "") + "<|COMPLETE|>"
        return '{"high_level_keywords": [], "low_level_keywords": []}'

    return ScriptedLLM(script=answer)


async def test_ppr_reaches_the_second_hop_that_local_mode_misses(tmp_path):
    """"Who founded the publisher of Climate Dynamics?": the founder's passage
    never names the journal. Local mode keeps only the journal's own edges;
    the walk from the journal reaches Springer and its founder's passage."""
    docs, llm = springer_and_lakes(12)
    async with make_rag(tmp_path, llm=llm) as rag:
        await rag.ainsert(docs)
        asked = dict(only_need_context=True, low_level_keywords=["Climate Dynamics"], high_level_keywords=["founder"],
                     top_k=1, chunk_top_k=1)
        question = "Who founded the publisher of Climate Dynamics?"
        # chunk_top_k bounds the chunks from every source (dense hits and walked chunks alike)
        walked = await rag.aquery(question, mode="ppr", **{**asked, "chunk_top_k": 4})
        local = await rag.aquery(question, mode="local", **asked)
        for item in walked.entities:  # scored by the walk, described like any entity
            assert item["stage"] == "ppr" and item["score"] > 0
            assert item["degree"] == (await rag.stores.graph.degrees([item["key"]]))[0] > 0
    founder = next(c for c in walked.chunks if c["content"].startswith("Springer was founded"))
    assert founder["id"] not in {c["id"] for c in local.chunks}
    assert {c["content"][:8] for c in local.chunks} == {"Climate "}
    # The walk ranks the journal's and the founder's passages above every lake's
    # (a lake may be a weak seed: the hash embedder finds neighbours by chance).
    order = [c["content"][:8] for c in walked.chunks]
    assert order.index("Springer") < min([i for i, x in enumerate(order) if x.startswith("Lake")] or [99]), order
    assert order.index("Climate ") < order.index("Springer")


async def test_the_question_links_its_relations_as_seeds(tmp_path, monkeypatch):
    """Query-to-triple linking: with no keyword linked to any entity, the
    endpoints of the relations nearest the question still seed the walk."""
    docs = ["Climate Dynamics is a journal published by Springer.",
            "Springer was founded by Julius Springer in Berlin in 1842."]
    async with make_rag(tmp_path, llm=scripted(EXTRACTIONS)) as rag:
        await rag.ainsert(docs)
        searcher = Searcher(rag.stores, rag.embedder)
        question = "Julius Springer founded Springer in Berlin"
        entities, _, chunks = await searcher.ppr([], [], 5, question)
        assert {"julius springer", "springer"} <= {e.key for e in entities}
        assert chunks and all(score > 0 for _, score in chunks)
        monkeypatch.setattr(ppr, "TRIPLE_SEEDS", 0)
        assert await Searcher(rag.stores, rag.embedder).ppr([], [], 5, question) == ([], [], [])


async def test_a_seed_far_from_the_question_weighs_less(tmp_path, monkeypatch):
    """Both keywords link their entity, but the question is about Climate
    Dynamics: weighed by their cosine to the question, the walk starts mostly
    there and ranks the publisher above the lake; unweighed, the lake first."""
    docs, llm = springer_and_lakes(6)
    question = "Who founded the publisher of the journal Climate Dynamics?"
    async with make_rag(tmp_path, llm=llm) as rag:
        await rag.ainsert(docs)

        async def scores(asked=question):
            entities, _, _ = await Searcher(rag.stores, rag.embedder).ppr(["Climate Dynamics", "Lake 3"], [], 20, asked)
            return {e.key: e.score for e in entities}

        weighted, unasked = await scores(), await scores("")
        monkeypatch.setattr(ppr, "RELEVANCE_EXPONENT", 0)
        flat = await scores()
        assert await scores("") == unasked  # without a question, every seed's relevance is 1
    assert flat["lake 3"] > flat["springer"], flat  # the lake's seed is as strong as the journal's
    assert weighted["climate dynamics"] > weighted["springer"] > weighted["lake 3"], weighted
