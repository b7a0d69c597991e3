"""examples/corpus indexed and queried with nothing configured: the offline LLM
and the default (hash) embedder.

Troubleshoot: run the same by hand, ``ragkit index examples/corpus`` then
``ragkit query "..." --mode mix --json``, and look at ``context`` (was the right
chunk retrieved?) and ``answer`` (did the answer rules pick its sentence?).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragkit.offline import NOTICE
from ragkit.offline.answer import NOTICE_EN, NOTICE_ZH
from ragkit.rag import RAG
from ragkit.schema import QueryParam, QueryResult
from ragkit.settings import Settings

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
ENGLISH = "Who leads the project whose supplier's delivery slipped?"
CHINESE = "交付推迟的供应商所供货的项目由谁负责？"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("offline-corpus")

    async def build() -> None:
        async with RAG(Settings(working_dir=folder)) as rag:
            loaded, report = await rag.ainsert(paths=CORPUS)
            files = [f for f in CORPUS.rglob("*") if f.suffix in (".md", ".pdf", ".docx")]
            assert len(loaded.documents) == len(files) >= 10 and all(i.outcome == "loaded" for i in loaded.items)
            assert not report.failed and report.dropped_rows == 0

    asyncio.run(build())
    return folder


async def ask(folder: Path, question: str, **options) -> QueryResult:
    async with RAG(Settings(working_dir=folder)) as rag:
        assert rag.llm.llm.model_id == "offline-rules-v1"
        return await rag.aquery(question, QueryParam(mode="mix", **options))


def line_citing(result: QueryResult, needle: str) -> tuple[str, str]:
    """The answer line that contains ``needle`` and the file its reference names."""
    files = {r.number: r.file_path or "" for r in result.references}
    for line in result.answer.splitlines():
        if needle in line:
            number = int(re.search(r"\[(\d+)\]$", line).group(1))
            return line, files[number]
    raise AssertionError(f"{needle!r} not in the answer:\n{result.answer}")


async def test_english_multi_hop_question_cites_the_project_file(indexed):
    result = await ask(indexed, ENGLISH)
    assert result.answer.startswith(NOTICE_EN)
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", result.answer)}
    assert numbers and numbers <= {r.number for r in result.references}
    line, path = line_citing(result, "Gu Yao")
    assert path.endswith("en/project-haijia.md") and "Project Haijia" in line
    assert "slipped" in result.answer.splitlines()[2]  # the first hop comes first


async def test_chinese_multi_hop_question_cites_the_project_file(indexed):
    result = await ask(indexed, CHINESE)
    assert result.answer.startswith(NOTICE_ZH)
    line, path = line_citing(result, "顾瑶")
    assert path.endswith("zh/海佳项目.md") and "海佳项目" in line


async def test_streamed_answer_equals_the_complete_one(indexed):
    whole = await ask(indexed, ENGLISH)
    streamed = await ask(indexed, ENGLISH, stream=True)
    assert streamed.stream is not None
    assert "".join([piece async for piece in streamed.stream]) == whole.answer


async def test_graph_holds_the_named_things_and_their_relation(indexed):
    async with RAG(Settings(working_dir=indexed)) as rag:
        for name in ("gu yao", "project haijia", "yingchuan electronics", "顾瑶", "海佳项目", "颖川电子"):
            assert (await rag.stores.graph.get_nodes([name]))[0] is not None, name
        edge = (await rag.stores.graph.get_edges([("gu yao", "project haijia")]))[0]
        assert edge is not None and "Gu Yao" in edge["description"]


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_notice_is_printed_once_per_process_and_only_for_the_default(tmp_path):
    """A configured LLM prints nothing; the default says so on stderr once,
    however many RAG objects use it."""
    out = run_python("""
        import sys
        from ragkit.rag import RAG
        from ragkit.settings import Settings
        import asyncio
        from ragkit.protocols import ChatRequest
        RAG(Settings(working_dir="a"), llm="scripted").llm
        print("after scripted", file=sys.stderr, flush=True)
        for _ in range(3):
            llm = RAG(Settings(working_dir="b")).llm.llm
            assert llm.model_id == "offline-rules-v1"
        print("before the first call", file=sys.stderr, flush=True)
        for _ in range(2):
            asyncio.run(llm.complete(ChatRequest(prompt="Who leads Haijia?", role="keywords")))
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    before, built, called = re.split("after scripted|before the first call", out.stderr)
    # Built but not asked: no notice, or every command would print it.
    assert NOTICE not in before and NOTICE not in built
    assert called.count(NOTICE) == 1, out.stderr


def test_cli_index_and_query_with_nothing_configured(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    ragkit = [sys.executable, "-m", "ragkit"]
    index = subprocess.run([*ragkit, "index", str(CORPUS / "en")], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert index.returncode == 0, index.stderr
    assert index.stderr.count(NOTICE) == 1
    query = subprocess.run([*ragkit, "query", ENGLISH], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert query.returncode == 0, query.stderr
    assert query.stdout.startswith("No generative model was used") and "Gu Yao" in query.stdout
    assert "project-haijia.md" in query.stdout.split("References:")[1]
