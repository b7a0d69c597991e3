"""Name what holds an event loop: a watchdog thread and a collector timer.

    with LoopWatchdog(threshold=0.1) as dog:   # inside the loop's thread
        ...
    dog.report()  # the stalls over the threshold, each with its sampled stacks

A heartbeat on the loop (every 5 ms) and a thread that looks at it every
10 ms: when the loop has not beaten for ``threshold`` seconds, the thread
samples the loop thread's stack (``sys._current_frames``) until it beats
again. A C call that holds the GIL (a collector pass, one ``json.dumps``)
keeps the watchdog out too, so the first sample of such a stall comes after
it; the ``gc.callbacks`` timer covers the collector, and the stall's
``first_sample_after_ms`` says how long the watchdog itself waited.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
import threading
import time
import traceback
from typing import Any


def _stack(frame: Any, depth: int = 14) -> str:
    entries = traceback.extract_stack(frame)[-depth:]
    return " <- ".join(f"{e.name}({e.filename.rsplit('/', 2)[-2:][-1]}:{e.lineno})" for e in reversed(entries))


class LoopWatchdog:
    def __init__(self, threshold: float = 0.1, keep: int = 40) -> None:
        self.threshold, self.keep = threshold, keep
        self.beat = time.perf_counter()
        self.stalls: list[dict[str, Any]] = []
        self.gc_passes: list[dict[str, Any]] = []
        self._gc_started: dict[int, float] = {}
        self._stop = threading.Event()
        self._t0 = time.perf_counter()

    # -- the loop side
    def _heartbeat(self) -> None:
        self.beat = time.perf_counter()
        if not self._stop.is_set():
            self._loop.call_later(0.005, self._heartbeat)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            self._gc_started[ident] = time.perf_counter()
        elif ident in self._gc_started:
            start = self._gc_started.pop(ident)
            took = time.perf_counter() - start
            if info["generation"] == 2 or took > 0.05:
                self.gc_passes.append({
                    "at_s": round(start - self._t0, 3), "ms": round(took * 1000, 1),
                    "generation": info["generation"], "collected": info["collected"],
                    "loop_thread": ident == self._loop_thread,
                })

    # -- the watchdog thread
    def _watch(self) -> None:
        frames_of = sys._current_frames
        while not self._stop.wait(0.01):
            beat = self.beat
            late = time.perf_counter() - beat
            if late < self.threshold:
                continue
            stacks: collections.Counter[str] = collections.Counter()
            first = late
            while self.beat == beat and not self._stop.is_set():
                frame = frames_of().get(self._loop_thread)
                if frame is not None:
                    stacks[_stack(frame)] += 1
                time.sleep(0.01)
            took = time.perf_counter() - beat
            self.stalls.append({
                "at_s": round(beat - self._t0, 3), "ms": round(took * 1000, 1),
                "first_sample_after_ms": round(first * 1000, 1), "samples": sum(stacks.values()),
                "stacks": stacks.most_common(3),
            })

    def __enter__(self) -> LoopWatchdog:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._loop.call_soon(self._heartbeat)
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        gc.callbacks.remove(self._on_gc)
        self._thread.join()

    def report(self) -> dict[str, Any]:
        stalls = sorted(self.stalls, key=lambda s: -s["ms"])[: self.keep]
        for s in stalls:
            s["gc_ms_within"] = round(sum(
                g["ms"] for g in self.gc_passes if s["at_s"] - 0.01 <= g["at_s"] <= s["at_s"] + s["ms"] / 1000), 1)
        full = [g for g in self.gc_passes if g["generation"] == 2]
        return {
            "stalls_over_threshold": len(self.stalls), "threshold_ms": self.threshold * 1000,
            "full_gc_passes": len(full), "full_gc_total_ms": round(sum(g["ms"] for g in full), 1),
            "full_gc_max_ms": max((g["ms"] for g in full), default=0.0),
            "longest_gc": sorted(self.gc_passes, key=lambda g: -g["ms"])[:10],
            "longest_stalls": stalls,
        }
