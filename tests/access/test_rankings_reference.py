"""A principal's rankings are those of an index of its readable documents alone.

``ragkit.testing.access_corpus``: a public document and finance-, legal- and
user-listed ones that share entities, indexed by the offline LLM with the
feature-hashing embedder (so scores tie often). For every principal, question,
mode and ``top_k``, the context a principal gets from the full index must
equal, item by item and in order, the one an index of only its readable
documents gives (inserted in another order): the same entities, relations
and chunks, degrees, scores (to float precision), context text and answer.

Each way a scoped search can take is checked: the items whose description it
recomputes found from the in-scope chunks or from the others
(``Restrictor.mentioned``), the others found by walking the index or scored
from their vectors (``query/scoped.py``, ``few``), as sized and forced.

Troubleshooting: the failure lists each differing query with the first field
that differs; ``ranking`` names the fields. A difference in ``entities`` or
``relations`` with the same items is an order (a tie broken by something else
than the vector id); other items mean the candidate set (an item the scoped
search never scored, or one it should not have shown).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragkit.core.scope import Restrictor, resolve_scope
from ragkit.offline import OfflineLLM
from ragkit.query import scoped
from ragkit.rag import RAG
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.access_corpus import DOCS, MODES, PRINCIPALS, QUESTIONS, ranking, readable, scores

TOP_KS = (1, 2, 5)


def make_rag(folder: Path) -> RAG:
    return RAG(Settings(working_dir=folder), llm=OfflineLLM(), embedder=HashEmbedder({"dimension": 128}))


async def _build(folder: Path, docs) -> Path:
    async with make_rag(folder) as rag:
        _, report = await rag.ainsert(documents=list(docs))
        assert not report.failed and len(report.processed) == len(docs)
    return folder


@pytest.fixture(scope="module")
def full_index(tmp_path_factory) -> Path:
    return asyncio.run(_build(tmp_path_factory.mktemp("rank-full"), DOCS))


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict[tuple, dict]:
    """Each principal's readable-only index, asked every query once."""
    async def ask_all() -> dict[tuple, dict]:
        answers = {}
        for name, principal in PRINCIPALS.items():
            folder = await _build(tmp_path_factory.mktemp(f"rank-{name}"), readable(principal))
            async with make_rag(folder) as rag:
                for question, mode, top_k in _queries():
                    result = await rag.aquery(question, mode=mode, top_k=top_k, only_need_context=True)
                    answers[name, question, mode, top_k] = result.model_dump()
        return answers

    return asyncio.run(ask_all())


def _queries():
    return [(q, mode, k) for q in QUESTIONS for mode in MODES for k in TOP_KS]


WAYS = [("smaller", "as sized"), ("in-scope", "walk"), ("in-scope", "direct"), ("out-of-scope", "as sized")]
"""(Which chunks' extractions name the items a scope recomputes; whether the
items it does not are found by walking the index or scored from their
vectors): the defaults, and each way forced."""


@pytest.fixture(params=WAYS, ids=["-".join(w) for w in WAYS])
def way(request, monkeypatch) -> tuple[str, str]:
    side, scoring = request.param
    if side != "smaller":
        smaller = Restrictor.mentioned
        monkeypatch.setattr(Restrictor, "mentioned", lambda self: smaller(self, inside=side == "in-scope"))
    if scoring != "as sized":
        monkeypatch.setattr(scoped, "few", lambda *_: scoring == "direct")
    return request.param


@pytest.mark.parametrize("name", sorted(PRINCIPALS))
async def test_every_query_ranks_as_the_readable_only_index(full_index, references, name, way):
    differences = []
    async with make_rag(full_index) as rag:
        for question, mode, top_k in _queries():
            got = (await rag.aquery(question, mode=mode, top_k=top_k, only_need_context=True,
                                    principal=PRINCIPALS[name])).model_dump()
            want = references[name, question, mode, top_k]
            field = next((f for f, value in ranking(got).items() if value != ranking(want)[f]), None)
            if field is None and scores(got) != pytest.approx(scores(want), abs=1e-5):
                field = "scores"
            if field is not None:
                differences.append(f"{mode} top_k={top_k} {question!r}: {field}: "
                                   f"{_short(got, field)} != {_short(want, field)}")
    assert not differences, f"{len(differences)} queries differ:\n" + "\n".join(differences)


def _short(result: dict, field: str) -> object:
    if field == "scores":
        return scores(result)[:8]
    value = ranking(result)[field]
    return value[:300] if isinstance(value, str) else value[:6] if isinstance(value, list) else value


def test_the_corpus_exercises_both_sides(full_index):
    """The principals between them read less and more than half the chunks:
    without a side forced, both ways are taken."""
    async def sides() -> set[bool]:
        async with make_rag(full_index) as rag:
            taken = set()
            for principal in PRINCIPALS.values():
                scope = await resolve_scope(rag.stores, None, None, principal)
                taken.add((await Restrictor(rag.stores, scope).mentioned()).inside)
            return taken

    assert asyncio.run(sides()) == {True, False}
