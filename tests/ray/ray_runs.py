"""What the Ray tests run: a MuSiQue corpus as files, settings for the replay
model (with a latency and a call log), ``ragkit index`` commands, snapshots of
the stores and the call log read back.

The replay model logs each call's start and end with its process id and LLM
cache key (``call_log``): how the tests see where calls ran, how many
overlapped and which were asked twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ragkit.testing.replay import musique_dir
from ragkit.testing.snapshot import differences, folder_snapshot

RAGKIT = Path(sys.executable).with_name("ragkit")
PASSAGES = 48
HASH_DIMENSION = 64


def write_corpus(folder: Path, count: int = PASSAGES) -> Path:
    passages = json.loads((musique_dir() / "corpus.json").read_text(encoding="utf-8"))
    folder.mkdir()
    for i, p in enumerate(passages[:count]):
        (folder / f"p{i:03d}.txt").write_text(f"{p['title']}\n{p['text']}", encoding="utf-8")
    return folder


def write_settings(path: Path, workdir: Path, log: Path, *, latency: float, concurrency: int = 4,
                   extra: str = "") -> Path:
    path.write_text(
        f'working_dir = "{workdir}"\n[index]\nllm_concurrency = {concurrency}\n{extra}'
        f'[llm]\nname = "replay"\n[llm.options]\nlatency = {latency}\ncall_log = "{log}"\n'
        '[embedder]\nname = "hash"\n',
        encoding="utf-8",
    )
    return path


def index_cmd(config: Path, corpus: Path, *args: str) -> list[str]:
    return [str(RAGKIT), "--config", str(config), "index", str(corpus), "--json", *args]


def env() -> dict[str, str]:
    return {**os.environ, "RAGKIT_TEST_DOUBLES": "1"}


def run(cmd: list[str], timeout: float = 240) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def snapshot(workdir: Path) -> dict:
    return asyncio.run(folder_snapshot(workdir, HASH_DIMENSION))


def calls(log: Path) -> list[tuple[str, int, str, str]]:
    """(event, pid, role, prompt digest) per line, in the order written."""
    out = []
    for line in log.read_text().splitlines():
        event, pid, role, key, _ = line.split()
        out.append((event, int(pid), role, key))
    return out


def most_at_once(log: Path) -> int:
    running = peak = 0
    for event, *_ in calls(log):
        running += 1 if event == "start" else -1
        peak = max(peak, running)
    return peak


def wait_for_calls(log: Path, ended: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and sum(1 for c in calls(log) if c[0] == "end") >= ended:
            return
        assert proc.poll() is None, f"the run ended before {ended} calls:\n{proc.communicate()[1][-4000:]}"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {ended} calls after {timeout} s")


def extraction_keys(snap: dict) -> set[str]:
    return {k for k, role in snap["llm_cache"].items() if role == "extraction"}


def same_stores(snap: dict, reference: dict) -> None:
    assert differences(snap, reference) == []
