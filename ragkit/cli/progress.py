"""``ragkit index``'s progress line and its ETA.

The ETA counts chunks, not documents: one large file is one document for the
whole run, and forty documents of different sizes are not forty equal steps.
The run's chunk total is known once every document is chunked; before that it
is estimated from the characters still to chunk at the chunks-per-character of
those chunked so far (``ragkit.pipeline.index``'s progress events). Two costs
are measured apart: extraction, per chunk extracted, and committing (merging,
summaries, vectors, the flush), as the time from the last extracted chunk to
a commit, per chunk extracted before it (a large document's window is
committed while nothing is extracted; a batch of small documents mostly while
others are, and then costs little). Chunks committed before an interruption
and resumed count as done, but not towards either cost. Until a first chunk is
extracted there is no rate, and the line says ``ETA estimating…`` rather than
a number; until a first commit the committing cost is unknown, so the figure
is a lower bound, shown ``ETA ≥47s``.
The final pass of deferred summaries has its own rate, from its first slice,
and is not in the estimate before it starts (benchmarks/findings.md, "What to
expect per MB", measures how far that leaves the figure).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

ESTIMATING = "estimating…"
_QUIET = frozenset({"documents_unchanged", "characters_chunked", "chunks_counted", "chunks_resumed"})
"""Bookkeeping for the estimate: the line shows what they change with the next event."""
_ALWAYS = frozenset({"documents_committed", "chunks_planned"})
"""Shown even within a second of the last line (``RAGKIT_PROGRESS=plain``): they are rare."""


class Eta:
    """Remaining seconds from the indexer's progress events; ``None`` while unknown."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.planned = False  # a run said what it will index (maybe nothing)
        self.started: float | None = None  # when the first text to index was planned
        self.characters = [0, 0]  # planned, chunked
        self.counted = 0  # chunks of the documents chunked so far
        self.extracted = 0
        self.resumed = 0
        self.commits = 0  # batches and windows committed in this run
        self.last_extracted = 0.0  # when the last chunk was extracted
        self.committing = 0.0  # seconds from a last extracted chunk to a commit, summed
        self.extracted_at_commit = 0  # chunks extracted before the last commit
        self.summaries = [0, 0, 0.0]  # the final summary pass: done, planned, when it started

    def hear(self, event: str, n: int) -> None:
        if event == "characters_planned":
            self.planned = True
            self.characters[0] += n
            if n and self.started is None:
                self.started = self.clock()
        elif event == "characters_chunked":
            self.characters[1] += n
        elif event == "chunks_counted":
            self.counted += n
        elif event == "chunks_extracted":
            self.extracted += n
            self.last_extracted = self.clock()
        elif event == "chunks_resumed":
            self.resumed += n
            self.commits -= 1  # its chunks_committed follows, and measures no merge
        elif event in ("chunks_committed", "documents_committed"):
            self.commits += 1
            if self.extracted > self.extracted_at_commit:
                self.committing += self.clock() - max(self.last_extracted, self.started or 0.0)
                self.extracted_at_commit = self.extracted
        elif event == "summaries_planned":
            self.summaries = [0, self.summaries[1] + n, self.clock()]
        elif event == "summaries_done":
            self.summaries[0] += n

    def chunks(self) -> float | None:
        """The run's chunks: counted, or estimated while some text is not chunked yet."""
        planned, chunked = self.characters
        if chunked >= planned:
            return self.counted
        if not chunked or not self.counted:
            return None
        return self.counted + (planned - chunked) * self.counted / chunked

    def seconds(self) -> float | None:
        done, planned, since = self.summaries
        if planned and done < planned:  # the final pass: its own rate, once a slice is done
            return (planned - done) * (self.clock() - since) / done if done else None
        if self.started is None:
            return 0.0 if self.planned else None  # nothing to index (all unchanged), or not known yet
        total = self.chunks()
        if total is None or not self.extracted:
            return None
        extracting = max(self.clock() - self.started - self.committing, 1e-9)
        left = max(0.0, total - self.resumed - self.extracted) * extracting / self.extracted
        if self.extracted_at_commit:
            left += max(0.0, total - self.resumed - self.extracted_at_commit) * self.committing / self.extracted_at_commit
        return left

    @property
    def lower_bound(self) -> bool:
        """Whether ``seconds`` leaves merging out (nothing committed yet this run)."""
        done, planned, _ = self.summaries
        return self.commits <= 0 and not (planned and done < planned)


def shown_eta(seconds: float | None, lower_bound: bool = False) -> str:
    if seconds is None:
        return ESTIMATING
    return ("≥" if lower_bound and seconds else "") + f"{seconds:.0f}s"


class StatusLine:
    """A command's progress on stderr: one self-overwriting line on a
    terminal, one line a second at most with ``RAGKIT_PROGRESS=plain`` (logs,
    pipes), nothing otherwise. ``show`` the newest text; ``finish`` writes the
    last one, whatever the throttle held back, and ends the line."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.plain = os.environ.get("RAGKIT_PROGRESS", "").strip().lower() == "plain"
        self.enabled = sys.stderr.isatty() or self.plain
        self.started = self.last = clock()
        self.text = ""

    def current(self) -> str:
        """The line as written now."""
        return f"{self.text}  {self.clock() - self.started:.0f}s elapsed   "

    def show(self, text: str | None = None, *, always: bool = False) -> None:
        """Write the line (``text`` replaces it), unless plain lines came less than a second ago."""
        if text is not None:
            self.text = text
        now = self.clock()
        if self.enabled and (always or not (self.plain and now - self.last < 1.0)):
            self.last = now
            self._write("\n" if self.plain else "")

    def finish(self) -> None:
        if self.enabled and self.text:
            self._write("\n")

    def _write(self, end: str) -> None:
        sys.stderr.write(("" if self.plain else "\r") + self.current() + end)
        sys.stderr.flush()


class ProgressLine(StatusLine):
    """``ragkit index``'s status line (``StatusLine``). Documents already
    indexed (unchanged) count as done, so a run after an interrupted one still
    ends at ``40/40 documents``."""

    def __init__(self, total: int, llm_stats, clock: Callable[[], float] = time.perf_counter) -> None:
        self.total = total
        self.done = 0  # committed in this run (recovered ones too)...
        self.unchanged = 0  # ...and found already indexed
        self.planned = 0  # chunks of documents indexed window by window...
        self.committed = 0  # ...and how many of them are committed
        super().__init__(clock)
        self.eta = Eta(clock)
        self.stats = llm_stats
        self.last = 0.0  # the first event is shown at once

    def __call__(self, event: str, n: int) -> None:
        self.eta.hear(event, n)
        if event == "documents_committed":
            self.done += n
        elif event == "documents_unchanged":
            self.unchanged += n
        elif event == "chunks_planned":
            self.planned += n
        elif event == "chunks_committed":
            self.committed += n
        if event in _QUIET or (event == "characters_planned" and not n):
            return
        self.show(always=event in _ALWAYS)

    def finish(self) -> None:
        """The last line, whatever the throttle held back (the unchanged
        documents are known only after recovery), and the end of the line."""
        if self.enabled:
            self._write("\n")

    def current(self) -> str:
        done = self.done + self.unchanged
        total = max(self.total, done)  # recovery may finish documents of an earlier run's other inputs
        unchanged = f" ({self.unchanged} unchanged)" if self.unchanged else ""
        large = f"  large documents: {self.committed}/{self.planned} chunks committed" if self.planned else ""
        finished, planned, _ = self.eta.summaries
        if planned and finished < planned:
            large += f"  summaries: {finished}/{planned} entities and relations"
        stats = self.stats()
        calls = sum(stats.calls.values()) if stats else 0
        tokens = sum(stats.input_tokens.values()) + sum(stats.output_tokens.values()) if stats else 0
        elapsed = self.clock() - self.started
        return (
            f"{done}/{total} documents{unchanged}  {self.eta.extracted} chunks{large}  {calls} LLM calls  "
            f"{tokens} tokens  {elapsed:.0f}s elapsed  ETA {shown_eta(self.eta.seconds(), self.eta.lower_bound)}   "
        )

