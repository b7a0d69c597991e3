"""A graph edit cut short is finished by the next write, never left half done.

Found by the fault campaign (tests/faults, docs/faults.md): an edit killed or
failing between its writes left the extractions at the new state and the graph
at the old one (or a node without its vector), and running the edit again did
not mend it (a rename found nothing left to rename, a create found the entity
there without a vector). Here the embedding model fails in the middle of each
edit, after the extractions are written; then the next write (the same edit
again, an insert, or ``check --repair``) must leave exactly the stores of a run
where the edit never failed, and ``check`` clean.

Troubleshooting: a leftover ``entity without vector`` means an element was
written before its vector (``graph_update``); a leftover old node means the
edit's journal was not replayed (``edit_journal``).
"""

from __future__ import annotations

import pytest

from ragkit.errors import ElementExistsError, ElementNotFoundError, GraphEditError, ModelError
from ragkit.pipeline.check import check
from ragkit.rag import RAG
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.snapshot import store_snapshot

TEXTS = [
    "Project F0 is led by Alice Moreau in Lisbon. Alice Moreau hired Northwind Labs to build the prototype. "
    "Northwind Labs delivered late, so Chen Wei audited Northwind Labs in Lisbon.",
    "Project F1 is led by Bruno Keller in Osaka. Bruno Keller hired Bluepeak Metals to build the prototype. "
    "Bluepeak Metals delivered late, so Alice Moreau audited Bluepeak Metals in Osaka.",
]
EDITS = {
    "rename": ("arename_entity", ("Alice Moreau", "Alice Moreau Senior"), {}),
    "merge": ("amerge_entities", (["Bluepeak Metals"], "Northwind Labs"), {}),
    "create": ("acreate_entity", ("Fault Entity", "concept", "Made while the embedder failed."), {}),
    "edit": ("aedit_entity", ("Chen Wei",), {"description": "An auditor."}),
}

REFUSED_AGAIN = {"rename": ElementNotFoundError, "merge": ElementNotFoundError, "create": ElementExistsError, "edit": ()}
"""What the same edit says when it runs again after the next write finished it."""


class FlakyEmbedder(HashEmbedder):
    """The hash embedder, failing while ``failing`` is set (a model server down)."""

    failing = False

    async def embed(self, texts):
        if self.failing:
            raise ModelError("embedding server unreachable (injected by the test)")
        return await super().embed(texts)


async def _indexed(tmp_path, name: str) -> tuple[RAG, FlakyEmbedder]:
    embedder = FlakyEmbedder({"dimension": 32})
    rag = RAG(Settings(working_dir=tmp_path / name), embedder=embedder)
    await rag.ainsert(TEXTS)
    return rag, embedder


async def _clean_run(tmp_path, method, args, kwargs) -> dict:
    rag, _ = await _indexed(tmp_path, "clean")
    async with rag:
        await getattr(rag, method)(*args, **kwargs)
        return await store_snapshot(rag.stores)


@pytest.mark.parametrize("finish", ["same edit again", "insert", "check --repair"])
@pytest.mark.parametrize("edit", list(EDITS))
async def test_edit_failing_midway_is_finished_by_the_next_write(tmp_path, edit, finish):
    method, args, kwargs = EDITS[edit]
    want = await _clean_run(tmp_path, method, args, kwargs)
    rag, embedder = await _indexed(tmp_path, "failed")
    async with rag:
        embedder.failing = True
        with pytest.raises(ModelError):
            await getattr(rag, method)(*args, **kwargs)
        embedder.failing = False
        kinds = {p.kind for p in (await check(rag.stores)).problems}
        if finish == "same edit again":
            try:
                await getattr(rag, method)(*args, **kwargs)
            except GraphEditError as exc:  # finished first: created already, or the old name gone
                assert isinstance(exc, REFUSED_AGAIN[edit]), exc
        elif finish == "insert":
            await rag.ainsert([])
        else:
            report = await check(rag.stores, rag.indexer().updater, repair=True)
            assert report.ok, report.problems
        assert (await check(rag.stores)).problems == []
        assert await store_snapshot(rag.stores) == want
    # Between the failure and the next write, check named what was left (and nothing else).
    assert kinds == {"interrupted edit"}, kinds

