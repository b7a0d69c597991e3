"""Deferred summaries (``ragkit.pipeline.summaries``): an ``insert()`` makes at
most one summary call per entity or relation, however many commit batches add
lines to it, and stores exactly what summarising at every batch stores.

Failure here: a batch summarised (calls grow with the batch count), the final
pass missed a key (the snapshots differ), or a run cut short between batches
left a state ``check`` rejects or that the next run does not finish.
"""

from __future__ import annotations

import pytest

from ragkit.core.extraction import SEPARATOR
from ragkit.pipeline.check import check
from ragkit.pipeline.index import IndexConfig
from ragkit.pipeline import summaries
from ragkit.pipeline.summaries import SUMMARY_PENDING
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot


@pytest.fixture(scope="module")
def eu_cluster() -> list[Document]:
    """14 passages, 12 of which mention the European Union: a hub entity."""
    corpus = load_musique()[0]
    return [Document.from_text(p["title"] + "\n" + p["text"]) for p in corpus[176:190]]


class RecordingReplay(ReplayLLM):
    """The replay LLM, remembering the subject of each summary request."""

    def __init__(self) -> None:
        super().__init__()
        self.subjects: list[str] = []

    async def complete(self, request):
        if request.role == "summary":
            self.subjects.append(request.prompt.split('"')[1])  # 'Write one description of "<subject>" ...'
        return await super().complete(request)


def make_rag(tmp_path, *, defer: bool, min_fragments: int = 3) -> tuple[RAG, RecordingReplay]:
    llm = RecordingReplay()
    config = IndexConfig(llm_concurrency=4, max_docs_in_flight=1, max_batch_docs=1)  # one batch per document
    config.merge.defer_summaries = defer
    config.merge.summary_min_fragments = min_fragments
    rag = RAG(Settings(working_dir=tmp_path), llm=llm, embedder=HashEmbedder({"dimension": 32}), index=config)
    return rag, llm


def summary_calls(report) -> int:
    return report.llm["calls"].get("summary", 0)


def over_threshold(snap: dict, min_fragments: int) -> int:
    """Entities and relations with enough sources to be summarised."""
    items = [*snap["nodes"].values(), *snap["edges"].values()]
    return sum(len(p["source_ids"]) >= min_fragments for p in items)


@pytest.mark.parametrize("keys_per_pass", [2048, 5], ids=["one-slice", "many-slices"])
async def test_batches_adding_lines_cost_one_summary_per_item_and_same_state(tmp_path, eu_cluster, monkeypatch, keys_per_pass):
    monkeypatch.setattr(summaries, "KEYS", keys_per_pass)  # the final pass in slices of keys: same result
    eager, eager_llm = make_rag(tmp_path / "eager", defer=False)
    async with eager:
        eager_report = await eager.indexer().insert(eu_cluster)
        eager_snap = await store_snapshot(eager.stores)
    lazy, lazy_llm = make_rag(tmp_path / "lazy", defer=True)
    async with lazy:
        report = await lazy.indexer().insert(eu_cluster)
        snap = await store_snapshot(lazy.stores)
        assert (await check(lazy.stores)).problems == []
        records = await lazy.stores.doc_status.get([d.id for d in eu_cluster])
        assert all(r is not None and SUMMARY_PENDING not in r.metadata for r in records)
    # Same stored state as a summary at every batch: purity kept.
    assert snap == eager_snap
    # 14 batches, "european union" gains a line in 12 of them; each item over
    # the threshold is summarised once (a source gives at least one line).
    calls = summary_calls(report)
    assert 0 < calls <= over_threshold(snap, 3)
    assert calls < summary_calls(eager_report)
    # The hub: summarised in many of the 14 batches before, once now; no subject twice.
    assert eager_llm.subjects.count("European Union") > 3
    assert lazy_llm.subjects.count("European Union") == 1
    assert len(lazy_llm.subjects) == len(set(lazy_llm.subjects)) == calls


async def test_run_cut_short_between_batches_is_valid_and_finished_next_run(tmp_path, eu_cluster):
    """A run stopped after its commits but before the final pass (what kill -9
    leaves): descriptions unsummarised, documents marked; ``check`` accepts it,
    and the next insert (nothing new) finishes exactly the missing summaries."""
    rag, _ = make_rag(tmp_path / "cut", defer=True)
    async with rag:
        indexer = rag.indexer()

        recovery = indexer._finish_summaries  # fault injection: the private step a kill interrupts
        runs: list[int] = []

        async def killed() -> None:  # the process dies before the final pass (not recovery's)
            runs.append(1)
            if len(runs) > 1:
                raise SystemExit("killed")
            await recovery()

        indexer._finish_summaries = killed  # type: ignore[method-assign]  # the kill, injected
        with pytest.raises(SystemExit):
            await indexer.insert(eu_cluster)
        records = await rag.stores.doc_status.get([d.id for d in eu_cluster])
        assert all(r is not None and r.metadata.get(SUMMARY_PENDING) for r in records)
        hub = await rag.stores.graph.get_node("european union")
        assert hub is not None and len(hub["description"].split(SEPARATOR)) >= 3  # joined lines, no summary yet
        assert (await check(rag.stores)).problems == []
    again, _ = make_rag(tmp_path / "cut", defer=True)
    async with again:
        report = await again.indexer().insert(eu_cluster)
        assert report.llm["calls"].get("extraction", 0) == 0
        cut_snap = await store_snapshot(again.stores)
        assert 0 < summary_calls(report) <= over_threshold(cut_snap, 3)
        records = await again.stores.doc_status.get([d.id for d in eu_cluster])
        assert all(r is not None and SUMMARY_PENDING not in r.metadata for r in records)
    clean, _ = make_rag(tmp_path / "clean", defer=True)
    async with clean:
        await clean.indexer().insert(eu_cluster)
        assert cut_snap == await store_snapshot(clean.stores)


async def test_the_final_pass_reports_its_progress(tmp_path, eu_cluster, monkeypatch):
    """On a large document the final pass takes minutes: it says how many
    entities and relations it will recompute, then what each slice did, and
    the two agree with the graph it leaves."""
    monkeypatch.setattr(summaries, "KEYS", 5)
    events: list[tuple[str, int]] = []
    rag, _ = make_rag(tmp_path, defer=True)
    rag.progress = lambda event, n: events.append((event, n))
    async with rag:
        await rag.indexer().insert(eu_cluster)
        items = await rag.stores.graph.node_count() + await rag.stores.graph.edge_count()
    planned = [n for e, n in events if e == "summaries_planned"]
    done = [n for e, n in events if e == "summaries_done"]
    assert planned == [items]
    assert len(done) > 1 and sum(done) == items
    assert [e for e, _ in events].index("summaries_planned") > [e for e, _ in events].index("documents_committed")
