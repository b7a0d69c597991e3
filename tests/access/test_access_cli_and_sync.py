"""Access lists from the command line (``ragkit index --allow-user/--allow-group``)
and the sync twins of the principal-scoped reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ragkit.access import AccessList
from ragkit.schema import Document

from .conftest import ALICE, BOB, MALLORY, PUBLIC, SECRET, TEAM, assert_clean, make_rag

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


def ragkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    env["RAGKIT_LLM"] = "offline"
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_index_flags_store_the_access_list(tmp_path):
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "pay.txt").write_text("Salaries at Acme Corp rise in March.\n")
    (tmp_path / "open.txt").write_text("Acme Corp sells anvils.\n")
    out = ragkit("index", "hr", "--allow-user", "carol", "--allow-group", "hr", "--allow-group", "exec", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = ragkit("index", "open.txt", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    bad = ragkit("index", "open.txt", "--allow-group", "bad\x07name", cwd=tmp_path)
    assert bad.returncode == 2 and "--allow-group" in bad.stderr and "control" in bad.stderr

    async def check() -> None:
        from ragkit.rag import RAG
        from ragkit.settings import Settings

        async with RAG(Settings(working_dir=tmp_path / "ragkit_data")) as rag:
            rows = {r.path: r.id for r in (await rag.adocuments()).documents}
            records = {r.file_path: r for r in await rag.stores.doc_status.get(list(rows.values()))}
        assert records["hr/pay.txt"].access == AccessList(users=["carol"], groups=["exec", "hr"])
        assert records["open.txt"].access is None

    import asyncio

    asyncio.run(check())


def test_sync_twins_take_the_principal(tmp_path):
    with make_rag(tmp_path / "w") as rag:
        rag.insert(documents=[PUBLIC, TEAM, SECRET])
        result = rag.query("What is Project Falcon?", mode="mix", principal=BOB, only_need_context=True)
        assert_clean(result.context)
        assert {d.id for d in rag.documents(principal=BOB).documents} == {PUBLIC.id}
        assert rag.search_entities("zeph", principal=ALICE) == []
        assert rag.entity("Zephyr Dynamics", principal=MALLORY) is not None
        assert rag.entity("Zephyr Dynamics", principal=ALICE) is None
        assert rag.relation("Project Falcon", "Dana Reyes", principal=ALICE) is not None
        assert rag.subgraph("Project Falcon", principal=BOB).nodes == []
        summary = rag.export(tmp_path / "bob.json", principal=BOB)
        assert summary.entities == 2
        streamed = rag.query("What is Project Falcon?", mode="mix", principal=BOB, stream=True)
        assert_clean("".join(streamed.stream))


async def test_a_changed_file_keeps_its_access_list(tmp_path):
    async with make_rag(tmp_path / "w") as rag:
        await rag.ainsert(documents=[Document.from_text("Version one of the plan.", file_path="plan.txt")],
                          access=AccessList(groups=["exec"]))
        await rag.ainsert(documents=[Document.from_text("Version two of the plan.", file_path="plan.txt")])
        rows = (await rag.adocuments()).documents
        assert [r.path for r in rows] == ["plan.txt"]
        (record,) = await rag.stores.doc_status.get([rows[0].id])
        assert "two" in (await rag.stores.full_docs.get_many([record.id]))[0]["content"]
        assert record.access == AccessList(groups=["exec"])
        assert (await rag.adocuments(principal=BOB)).documents == []


def test_query_as_a_user_and_groups_from_the_command_line(tmp_path):
    """``ragkit query --as-user U --as-group G``: the CLI's ``principal=``."""
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "pay.txt").write_text("Salaries at Acme Corp rise under the Orchid Plan.\n")
    (tmp_path / "open.txt").write_text("Acme Corp sells anvils.\n")
    assert ragkit("index", "hr", "--allow-group", "hr", cwd=tmp_path).returncode == 0
    assert ragkit("index", "open.txt", cwd=tmp_path).returncode == 0
    question = ("query", "What does Acme Corp do?", "--mode", "naive", "--context-only")
    everything = ragkit(*question, cwd=tmp_path)
    outsider = ragkit(*question, "--as-user", "dan", cwd=tmp_path)
    insider = ragkit(*question, "--as-user", "erin", "--as-group", "hr", cwd=tmp_path)
    assert "Orchid" in everything.stdout and "Orchid" in insider.stdout, (everything.stderr, insider.stderr)
    assert outsider.returncode == 0 and "anvils" in outsider.stdout and "Orchid" not in outsider.stdout
    lone = ragkit(*question, "--as-group", "hr", cwd=tmp_path)
    assert lone.returncode == 2 and "--as-user" in lone.stderr
    bad = ragkit(*question, "--as-user", " padded", cwd=tmp_path)
    assert bad.returncode == 2 and "--as-user" in bad.stderr
