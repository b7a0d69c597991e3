"""The ETA of ``ragkit index``, fed the indexer's
progress events on a clock the test moves: ``estimating…`` until a rate is
known, then from chunks (counted or estimated from characters), never ``0s``
while work is left; resumed chunks count as done but not towards the rate.
(``test_cli_progress.py`` checks the same on real runs.)

Troubleshooting: the events are documented in ``ragkit/pipeline/index.py``; a
wrong figure here names the event the estimate mishandles.
"""

from __future__ import annotations

import pytest

from ragkit.cli.progress import ESTIMATING, Eta, ProgressLine, shown_eta


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_estimating_until_the_first_chunk_then_from_chunks_not_documents():
    clock = Clock()
    eta = Eta(clock)
    eta.hear("characters_planned", 10_000)  # 40 documents, but only the characters matter
    assert eta.seconds() is None and shown_eta(eta.seconds()) == ESTIMATING
    clock.now = 1.0
    eta.hear("chunks_counted", 10)
    eta.hear("characters_chunked", 1_000)  # one document chunked: 1 chunk per 100 characters
    assert eta.chunks() == pytest.approx(100)
    assert eta.seconds() is None  # chunks known, no rate yet: not "0s"
    clock.now = 10.0
    eta.hear("chunks_extracted", 5)  # 0.5 chunks/s since the start
    assert eta.seconds() == pytest.approx(95 / 0.5)
    eta.hear("chunks_counted", 90)
    eta.hear("characters_chunked", 9_000)
    assert eta.chunks() == 100 and eta.seconds() == pytest.approx(190)
    # Nothing committed yet: the rate holds no merging, so the figure is a lower bound.
    assert eta.lower_bound and shown_eta(eta.seconds(), eta.lower_bound) == "≥190s"
    eta.hear("chunks_committed", 5)  # a first window merged: its time is in the rate from now on
    assert not eta.lower_bound and shown_eta(eta.seconds(), eta.lower_bound) == "190s"


def test_a_resumed_large_file_is_estimating_then_counts_its_resumed_chunks_as_done():
    """The reported ``0/4921 chunks committed … ETA 0s`` on a resumed file."""
    clock = Clock()
    line = ProgressLine(1, lambda: None, clock=clock)
    for event, n in [("characters_planned", 20_000_000), ("chunks_counted", 4921),
                     ("characters_chunked", 20_000_000), ("chunks_planned", 4921),
                     ("chunks_resumed", 1536), ("chunks_committed", 1536)]:
        line(event, n)
    assert "1536/4921 chunks committed" in line.current() and line.current().rstrip().endswith(f"ETA {ESTIMATING}")
    clock.now = 20.0
    line("chunks_extracted", 10)  # 10 chunks in 20 s; the resumed ones were not extracted in this run
    assert line.eta.seconds() == pytest.approx((4921 - 1536 - 10) * 2)
    assert line.eta.lower_bound  # the resumed chunks' commit measured no merge
    assert line.current().rstrip().endswith(f"ETA ≥{(4921 - 1536 - 10) * 2}s")


def test_the_summary_pass_is_estimating_until_its_first_slice():
    clock = Clock()
    eta = Eta(clock)
    eta.hear("characters_planned", 100)
    eta.hear("chunks_counted", 1)
    eta.hear("characters_chunked", 100)
    eta.hear("chunks_extracted", 1)
    clock.now = 5.0
    eta.hear("summaries_planned", 4096)
    assert eta.seconds() is None
    clock.now = 15.0
    eta.hear("summaries_done", 2048)
    assert eta.seconds() == pytest.approx(10.0)


def test_unchanged_documents_count_as_done():
    line = ProgressLine(40, lambda: None, clock=Clock())
    line("documents_unchanged", 16)
    line("documents_committed", 24)
    assert line.current().startswith("40/40 documents (16 unchanged)")
    everything_indexed = ProgressLine(40, lambda: None, clock=Clock())
    everything_indexed("documents_unchanged", 40)
    assert everything_indexed.eta.seconds() is None  # not known until the run says it has nothing to do
    everything_indexed("characters_planned", 0)
    assert everything_indexed.eta.seconds() == 0.0


def test_a_windows_commit_is_measured_apart_from_extraction():
    """The shape of the measured 2 MiB run (benchmarks/findings.md, "What to
    expect per MB"): a
    first window of 256 chunks extracted in 140 s and committed 60 s later;
    then the commit's cost is counted for the chunks left too."""
    clock = Clock()
    eta = Eta(clock)
    for event, n in [("characters_planned", 2_000_000), ("chunks_counted", 431),
                     ("characters_chunked", 2_000_000), ("chunks_planned", 431)]:
        eta.hear(event, n)
    clock.now = 140.0
    eta.hear("chunks_extracted", 256)
    assert eta.lower_bound and eta.seconds() == pytest.approx(175 * 140 / 256)  # extraction alone
    clock.now = 200.0
    eta.hear("chunks_committed", 256)
    clock.now = 205.0
    eta.hear("chunks_extracted", 11)
    extraction = (431 - 267) * (205 - 60) / 267
    committing = (431 - 256) * 60 / 256
    assert not eta.lower_bound and eta.seconds() == pytest.approx(extraction + committing)
