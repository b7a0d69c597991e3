"""``rag.insert(paths=[...])`` with a path that does not exist:
it raises ``InputNotFoundError`` naming every missing path, before anything is
written, instead of returning a report whose only trace is a failed
``LoadItem``. The result of a good insert is an ``InsertResult`` whose fields
are what the README documents.

Troubleshooting: a test that finds documents after the error means the check
runs after loading or indexing started (``RAG.ainsert``).
"""

from __future__ import annotations

import pytest

from ragkit.errors import InputNotFoundError, RagkitError
from ragkit.pipeline.load import LoadItem
from ragkit.rag import RAG, InsertResult
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.corpus import write_passages


@pytest.fixture
def rag(tmp_path):
    with RAG(Settings(working_dir=tmp_path / "data"), llm="offline", embedder=HashEmbedder()) as rag:
        yield rag


def test_a_missing_path_raises_and_indexes_nothing(tmp_path, rag, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_passages(tmp_path / "docs", limit=2)
    with pytest.raises(InputNotFoundError) as caught:
        rag.insert(paths=["docs/", "notes.md", tmp_path / "gone"])
    error = caught.value
    assert isinstance(error, RagkitError) and isinstance(error, FileNotFoundError)
    assert error.paths == ["notes.md", (tmp_path / "gone").as_posix()]
    assert "'notes.md'" in str(error) and "nothing was indexed" in str(error) and "Fix:" in str(error)
    assert sum(rag.status().values()) == 0


def test_insert_returns_the_documented_result(tmp_path, rag, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_passages(tmp_path / "docs", limit=2)
    (tmp_path / "docs" / "empty.txt").write_text("")
    result = rag.insert(paths=["docs/"])
    assert isinstance(result, InsertResult)
    loaded, report = result  # still a pair
    assert loaded is result.loaded and report is result.report
    items = {item.path: item for item in result.loaded.items}
    assert isinstance(items["docs/empty.txt"], LoadItem)
    assert items["docs/empty.txt"].outcome == "skipped" and items["docs/empty.txt"].message == "empty file"
    assert [i.path for i in result.loaded.problems] == ["docs/empty.txt"]
    assert sorted(result.report.processed) == sorted(i.doc_id for i in result.loaded.items if i.outcome == "loaded")
    assert result.report.chunks >= 2 and result.report.failed == {}
