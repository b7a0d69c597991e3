"""``ragkit migrate`` killed mid-copy (a real ``kill -9`` of the CLI process),
then run again: the second run resumes from the progress record in the target
(it says so, and writes less than the whole workspace), verifies, and leaves a
target that ``ragkit check`` finds clean and that answers as the source does.

Into the embedded stores (their journals cut off by the kill) and into the
servers (whose writer lease the dead process still holds until it expires).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_backend_matrix import MODES, settings_for
from test_migrate import drop_all

from ragkit.backends import build_store
from ragkit.pipeline.migrate import PROGRESS_KEY, PROGRESS_NAMESPACE
from ragkit.sections.index import IndexConfig
from ragkit.rag import RAG
from ragkit.schema import Document, QueryParam
from ragkit.settings import Settings
from ragkit.testing.recall import passage_text
from ragkit.testing.replay import ReplayLLM, load_musique
from ragkit.testing.snapshot import store_snapshot

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"
N_QUESTIONS = 3


def toml(settings: Settings, lease_ttl: float = 2) -> str:
    """The settings as a ragkit.toml (scalar options only, as the servers' are)."""
    lines = [f"workspace = {json.dumps(settings.workspace)}", f"working_dir = {json.dumps(str(settings.working_dir))}"]
    for kind in ("kv", "vector", "graph", "doc_status"):
        backend = getattr(settings, kind)
        lines += [f"[{kind}]", f"name = {json.dumps(backend.name)}"]
        options = backend.adapter_options()
        if options:
            lines += [f"[{kind}.options]", *(f"{k} = {json.dumps(v)}" for k, v in options.items())]
    return "\n".join([*lines, "[lock]", f"lease_ttl = {lease_ttl}", ""])


def ragkit(*args: str, cwd: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    env["RAGKIT_PROGRESS"] = "plain"
    return subprocess.Popen([RAGKIT, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def index_source(settings: Settings) -> list[dict]:
    questions = load_musique()[2][:N_QUESTIONS]
    texts = sorted({passage_text(p["title"], p["paragraph_text"]) for q in questions for p in q["paragraphs"]})
    docs = [Document.from_text(t, file_path=f"p{i:03d}.txt") for i, t in enumerate(texts)]

    async def run() -> None:
        async with RAG(settings, llm=ReplayLLM(), index=IndexConfig(llm_concurrency=4)) as rag:
            report = await rag.indexer().insert(docs)
            assert not report.failed

    asyncio.run(run())
    return questions


async def progress_record(settings: Settings) -> dict | None:
    async with build_store(settings, "kv", PROGRESS_NAMESPACE) as store:
        return await store.get(PROGRESS_KEY)


async def answers_and_snapshot(settings: Settings, questions: list[dict]) -> tuple[dict, dict]:
    async with RAG(settings, llm=ReplayLLM()) as rag:
        answers = {}
        for q in questions:
            for mode in MODES:
                r = await rag.aquery(q["question"], QueryParam(mode=mode))
                answers[(q["id"], mode)] = (r.answer, [c["id"] for c in r.chunks])
        return answers, await store_snapshot(rag.stores)


@pytest.mark.parametrize("combo", ["embedded", "servers"])
def test_a_migration_killed_mid_copy_resumes_and_verifies(combo, tmp_path):
    source = Settings(working_dir=tmp_path / "source", workspace="w")
    target = settings_for(combo, tmp_path / "target")
    (tmp_path / "source.toml").write_text(toml(source))
    (tmp_path / "target.toml").write_text(toml(target))
    questions = index_source(source)
    try:
        # Pages of one record: a copy long enough to be killed in its middle.
        proc = ragkit("--config", "source.toml", "migrate", "--to", "target.toml", "--batch", "1", cwd=tmp_path)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and not line.startswith("copying "):
            line = proc.stderr.readline()
        assert line, f"no progress before the end: {proc.communicate()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        cut = asyncio.run(progress_record(target))
        assert cut is not None and not cut["finished"], cut
        assert any(s["copied"] for s in cut["steps"].values()), cut

        started = time.perf_counter()
        again = ragkit("--config", "source.toml", "migrate", "--to", "target.toml", "--json", cwd=tmp_path)
        out, err = again.communicate(timeout=600)
        assert again.returncode == 0, err[-3000:]
        report = json.loads(out)
        assert report["resumed"], report
        assert sum(report["copied"].values()) < sum(report["records"].values()), report
        assert all(report["verified"][p] for p, n in report["records"].items() if n), report
        assert time.perf_counter() - started < 300

        check = ragkit("--config", "target.toml", "check", cwd=tmp_path)
        out, err = check.communicate(timeout=600)
        assert check.returncode == 0 and out.strip().endswith("no problems found"), (out, err)
        assert asyncio.run(progress_record(target))["finished"]

        want = asyncio.run(answers_and_snapshot(source, questions))
        got = asyncio.run(answers_and_snapshot(target, questions))
        assert got[1] == want[1]
        assert got[0] == want[0]
    finally:
        if combo != "embedded":
            asyncio.run(drop_all(target))
