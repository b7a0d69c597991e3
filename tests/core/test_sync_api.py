"""The sync API: one long-lived event loop per ``RAG``, the same
signatures as the async methods, working inside a running loop, stores opened
once, a clean close; and ``insert`` taking texts and paths as separate arguments.

Troubleshooting: a hang here is a sync call waiting for a loop that cannot run
it (see the "Event loops" decisions in ``ragkit/rag.py``); pytest's
faulthandler_timeout prints every thread's stack.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import subprocess
import sys
import threading
import typing
import warnings
from dataclasses import fields
from pathlib import Path

import pytest

from ragkit.errors import InputNotFoundError

from ragkit.rag import RAG
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder

TEXTS = [
    "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.",
    "Charles Babbage designed the Difference Engine. Babbage taught at Cambridge.",
    "The Q3/Q4 review found that Yingchuan's delivery slipped for the Haijia project.",
]
QUESTION = "Who worked with Charles Babbage?"


def make_rag(working_dir: Path) -> RAG:
    """The embedded defaults: SQLite, numpy, NetworkX, the offline LLM."""
    return RAG(Settings(working_dir=working_dir), embedder=HashEmbedder({"dimension": 64}))


def snapshot(result) -> tuple:
    return result.answer, result.context, [(r.number, r.doc_id) for r in result.references]


def count_opens(rag: RAG) -> dict[str, int]:
    """Counts each real store's ``open()`` calls, by wrapping the bound method."""
    opens: dict[str, int] = {}
    for name, store in ((f.name, getattr(rag.stores, f.name)) for f in fields(rag.stores)):
        real = store.open

        async def counted(real=real, name=name):
            opens[name] = opens.get(name, 0) + 1
            await real()

        store.open = counted
    return opens


# -- inside a running event loop ------------------------------------------------------------


def test_sync_calls_work_inside_a_running_loop_and_match_the_async_api(tmp_path):
    """A notebook cell or a FastAPI handler: the sync API called with a loop
    running in the thread (asyncio.run used to fail there)."""

    async def notebook() -> tuple:
        rag = make_rag(tmp_path / "sync")
        try:
            _, report = rag.insert(TEXTS)
            assert len(report.processed) == len(TEXTS)
            return snapshot(rag.query(QUESTION, mode="mix"))
        finally:
            rag.close()

    async def async_api() -> tuple:
        async with make_rag(tmp_path / "async") as rag:
            await rag.ainsert(TEXTS)
            return snapshot(await rag.aquery(QUESTION, mode="mix"))

    from_sync, from_async = asyncio.run(notebook()), asyncio.run(async_api())
    assert from_sync == from_async
    assert from_sync[0] and "Lovelace" in from_sync[1]


def test_a_sync_insert_then_query_opens_each_store_once(tmp_path):
    rag = make_rag(tmp_path)
    opens = count_opens(rag)
    rag.insert(TEXTS)
    rag.query(QUESTION, only_need_context=True)
    rag.query(QUESTION, mode="local", only_need_context=True)
    assert rag.status()["processed"] == len(TEXTS)
    assert opens == {f.name: 1 for f in fields(rag.stores)}
    rag.close()


# -- signatures -----------------------------------------------------------------------------


def twins() -> list[tuple[str, str]]:
    names = [n for n, f in vars(RAG).items() if n.startswith("a") and inspect.iscoroutinefunction(f)]
    return [(n.removeprefix("a"), n) for n in names]


def test_every_async_method_has_a_sync_twin_with_the_same_signature():
    pairs = twins()
    assert {"insert", "query", "delete", "status", "open", "close", "export"} <= {s for s, _ in pairs}
    for sync_name, async_name in pairs:
        sync, asynchronous = getattr(RAG, sync_name), getattr(RAG, async_name)
        assert not inspect.iscoroutinefunction(sync), sync_name
        assert inspect.signature(sync) == inspect.signature(asynchronous), sync_name
        assert typing.get_type_hints(sync) == typing.get_type_hints(asynchronous), sync_name
        assert sync.__name__ == sync_name


def test_insert_shows_its_real_parameters():
    """What an editor shows: the parameters, not (*args, **kwargs)."""
    params = inspect.signature(RAG.insert).parameters
    assert list(params) == ["self", "texts", "paths", "documents", "access", "principal"]
    assert params["paths"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "InsertResult" in str(inspect.signature(RAG.insert).return_annotation)  # a named (LoadReport, IndexReport)


# -- warnings, errors, mixing ---------------------------------------------------------------


def test_no_coroutine_is_left_unawaited_on_any_path(tmp_path):
    """Including the error path: a sync call on the loop that has the stores open."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rag = make_rag(tmp_path)
        rag.insert(TEXTS)
        rag.query(QUESTION, only_need_context=True)
        rag.close()

        async def misuse() -> None:
            async with rag:
                await rag.aquery(QUESTION, only_need_context=True)
                with pytest.raises(RuntimeError, match="await the async twin"):
                    rag.query(QUESTION, only_need_context=True)

        asyncio.run(misuse())
        del rag
        gc.collect()
    unawaited = [w for w in caught if issubclass(w.category, RuntimeWarning) and "never awaited" in str(w.message)]
    assert unawaited == []


def test_async_calls_from_another_loop_run_on_the_home_loop(tmp_path):
    """Sync first, then `await rag.aquery(...)` on the caller's own loop: routed
    to the RAG's loop (its stores live there), streams relayed piece by piece."""
    rag = make_rag(tmp_path)
    rag.insert(TEXTS)
    expected = snapshot(rag.query(QUESTION))
    opens = count_opens(rag)

    async def elsewhere() -> tuple:
        result = await rag.aquery(QUESTION)
        streamed = await rag.aquery(QUESTION, stream=True)
        pieces = [piece async for piece in streamed.stream]
        return snapshot(result), "".join(pieces), streamed.answer

    result, joined, answer = asyncio.run(elsewhere())
    assert result == expected and joined == answer == expected[0]
    assert opens == {}  # nothing reopened on the caller's loop
    rag.close()


def test_a_stopped_home_loop_is_a_clear_error_and_close_recovers(tmp_path):
    rag = make_rag(tmp_path)
    asyncio.run(rag.ainsert(TEXTS))  # no aclose: the stores stay open on a loop that ends
    with pytest.raises(RuntimeError, match=r"no longer running.*rag\.close\(\)"):
        asyncio.run(rag.aquery(QUESTION))
    with pytest.raises(RuntimeError, match="no longer running"):
        rag.query(QUESTION)
    rag.close()
    assert rag.query(QUESTION, only_need_context=True).sources
    rag.close()


def test_sync_stream_is_a_plain_iterator(tmp_path):
    with make_rag(tmp_path) as rag:
        rag.insert(TEXTS)
        whole = rag.query(QUESTION).answer
        result = rag.query(QUESTION, stream=True)
        assert not hasattr(result.stream, "__anext__")
        assert "".join(result.stream) == result.answer == whole


# -- closing --------------------------------------------------------------------------------


def test_close_stops_the_loop_thread_and_a_later_call_reopens(tmp_path):
    before = threading.active_count()
    rag = make_rag(tmp_path)
    opens = count_opens(rag)
    rag.insert(TEXTS)
    first = snapshot(rag.query(QUESTION))
    thread = rag.loop_thread
    assert thread is not None and thread.alive and threading.active_count() > before
    rag.close()
    assert not thread.alive and threading.active_count() <= before  # its executor's threads too
    rag.close()  # twice is harmless
    assert snapshot(rag.query(QUESTION)) == first  # reopens, on a new loop thread
    assert set(opens.values()) == {2}
    second = rag.loop_thread
    rag.close()
    assert second is not thread and not second.alive


def test_the_with_block_closes(tmp_path):
    with make_rag(tmp_path) as rag:
        rag.insert(TEXTS)
        thread = rag.loop_thread
        assert thread is not None and thread.alive
    assert not thread.alive and rag.home_loop is None and rag.loop_thread is None
    with make_rag(tmp_path) as again:
        assert again.status()["processed"] == len(TEXTS)


def test_an_unclosed_rag_does_not_hang_the_interpreter_at_exit(tmp_path):
    """A daemon loop thread, and stores closed by the finalizer at exit."""
    script = f"""
from ragkit.rag import RAG
from ragkit.settings import Settings
rag = RAG(Settings(working_dir={str(tmp_path)!r}))
rag.insert(["Ada Lovelace worked with Charles Babbage."])
print(rag.status()["processed"])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    with RAG(Settings(working_dir=tmp_path)) as rag:
        assert rag.status()["processed"] == 1


# -- texts and paths ------------------------------------------------------------------------


def test_text_that_looks_like_a_path_is_indexed_as_text(tmp_path):
    with make_rag(tmp_path / "w") as rag:
        loaded, report = rag.insert("Q3/Q4")
        assert [i.outcome for i in loaded.items] == ["loaded"] and len(report.processed) == 1
        assert loaded.documents[0].content == "Q3/Q4"


def test_paths_are_a_separate_argument(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("Ada Lovelace worked with Charles Babbage.")
    with make_rag(tmp_path / "w") as rag:
        missing = str(tmp_path / "missing.md")
        # A path that does not exist is an error before anything is indexed, not a failed item a caller may not read.
        with pytest.raises(InputNotFoundError, match="missing.md"):
            rag.insert("a text", paths=[tmp_path / "docs", missing])
        assert sum(rag.status().values()) == 0
        loaded, _ = rag.insert("a text", paths=[tmp_path / "docs"])
        assert [(i.path, i.outcome) for i in loaded.items] == [
            ("<text #1>", "loaded"), (f"{tmp_path.as_posix()}/docs/a.md", "loaded"),
        ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda rag: rag.insert(Path("notes.md")), "texts .* got PosixPath.*Fix: pass files and folders as paths="),
        (lambda rag: rag.insert(["ok", 3]), "texts .* got 3"),
        (lambda rag: rag.insert(b"bytes"), "decode the bytes"),
        (lambda rag: rag.insert(paths=[1]), "paths= takes files and folders"),
        (lambda rag: rag.insert(documents=["text"]), "documents= takes .*Document"),
        (lambda rag: rag.insert(), "needs something to index"),
    ],
)
def test_a_wrong_type_is_a_clear_error(tmp_path, call, message):
    rag = make_rag(tmp_path)
    with pytest.raises(TypeError, match=message):
        call(rag)
    rag.close()


# -- finding and deleting documents from the Python API ----------------------------------------


def test_documents_and_delete_by_id_or_path_from_the_python_api(tmp_path):
    """``rag.documents()`` pages like ``ragkit documents``; ``rag.delete`` takes ids or
    indexed paths, and an unknown name deletes nothing (like ``ragkit delete``)."""
    from ragkit.errors import DocumentNotFoundError

    notes = tmp_path / "notes.txt"
    notes.write_text("Grace Hopper led the COBOL work at Remington Rand.")
    with make_rag(tmp_path / "ws") as rag:
        rag.insert(TEXTS, paths=[notes])
        first = rag.documents(limit=2)
        rest = rag.documents(limit=2, cursor=first.next_cursor)
        rows = first.documents + rest.documents
        assert first.total == 4 and rest.next_cursor is None and len({d.id for d in rows}) == 4
        by_path = {d.path: d.id for d in rows}
        assert notes.as_posix() in by_path

        with pytest.raises(DocumentNotFoundError, match="no-such-file.txt"):
            rag.delete([notes.as_posix(), "no-such-file.txt"])
        assert rag.documents().total == 4  # nothing deleted

        assert rag.delete(notes.as_posix()) == [by_path[notes.as_posix()]]
        other = next(d.id for d in rows if d.path != notes.as_posix())
        assert rag.delete([other]) == [other]
        assert {d.id for d in rag.documents().documents} == {d.id for d in rows} - {by_path[notes.as_posix()], other}
