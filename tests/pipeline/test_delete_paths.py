"""``ragkit delete PATH`` from another folder than the one ``ragkit index`` ran in:
the loader records each file's absolute path, so a file is
found by its absolute path, or by a path relative to the folder ``delete`` runs
in, wherever the index ran.

Troubleshooting: ``ragkit documents --json`` lists the paths as given; the
absolute one is in the status record's metadata (``identity.SOURCE_PATH``) and
is the ``doc_paths`` key. A failure here with "no document ... was indexed from
the path" means one of them is missing or differs from ``os.path.abspath``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ragkit.rag import RAG
from ragkit.settings import Settings
from ragkit.testing.corpus import write_passages

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"


def ragkit(*args: str, cwd: Path, data: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    env.update(RAGKIT_LLM="replay", RAGKIT_WORKING_DIR=str(data))
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def ok(*args: str, cwd: Path, data: Path) -> str:
    out = ragkit(*args, cwd=cwd, data=data)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def documents(data: Path) -> dict[str, str]:
    async def go():
        async with RAG(Settings(working_dir=data)) as rag:
            page = await rag.stores.doc_status.list_page(None, 100, None)
            return {r.file_path: r.metadata.get("ragkit_source_path") for r in page.items}  # identity.SOURCE_PATH

    return asyncio.run(go())


def test_delete_by_path_from_another_folder(tmp_path):
    project, elsewhere, data = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "data"
    write_passages(project / "corpus", limit=4)
    elsewhere.mkdir()
    ok("index", "corpus", cwd=project, data=data)
    ok("index", str(project / "corpus" / "passage-3.txt"), cwd=elsewhere, data=data)  # already indexed: unchanged
    # The reported case: an absolute path from another folder.
    out = ok("delete", str(project / "corpus" / "passage-0.txt"), cwd=elsewhere, data=data)
    assert "deleted 1 document(s)" in out
    # Relative to the folder delete runs in.
    out = ok("delete", "../project/corpus/passage-1.txt", cwd=elsewhere, data=data)
    assert "deleted 1 document(s)" in out
    # From a subfolder of the project, relative to it.
    (project / "sub").mkdir()
    out = ok("delete", "../corpus/passage-2.txt", cwd=project / "sub", data=data)
    assert "deleted 1 document(s)" in out
    recorded = documents(data)
    assert recorded == {"corpus/passage-3.txt": (project / "corpus" / "passage-3.txt").as_posix()}

    # A path that names no indexed file from there is still an error that deletes nothing.
    out = ragkit("delete", "../project/corpus/passage-9.txt", cwd=elsewhere, data=data)
    assert out.returncode == 2 and "nothing was deleted" in out.stderr


def test_reindexing_from_another_folder_replaces_the_old_version(tmp_path):
    """The path key is the absolute path: a changed file indexed under another
    spelling (absolute, from elsewhere) replaces its old version, not beside it."""
    project, elsewhere, data = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "data"
    write_passages(project / "corpus", limit=2)
    elsewhere.mkdir()
    ok("index", "corpus", cwd=project, data=data)
    file = project / "corpus" / "passage-0.txt"
    file.write_text(file.read_text() + "\nIt was updated in 2024.")
    out = ok("index", str(file), cwd=elsewhere, data=data)
    assert "1 old versions replaced" in out, out
    assert len(documents(data)) == 2
