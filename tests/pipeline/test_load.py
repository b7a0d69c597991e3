"""The load stage: texts, files and folders to documents, and a report of every input.

Real files in ``tmp_path`` throughout. Races (a file vanishing or changing while
it is read) are made deterministic by wrapping ``load._read_bytes``, the one
function that reads a file's bytes. The rules tested here are listed in the
docstring of ``ragkit.pipeline.load``.
"""

from __future__ import annotations

import codecs
import json
import os
import random
import time
from pathlib import Path

import pytest

from ragkit.pipeline import load as load_mod
from ragkit.loaders.text import TEXT_EXTENSIONS
from ragkit.pipeline.load import LoadReport, load_documents
from ragkit.schema import Document

needs_unprivileged = pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions"
)


def by_path(report: LoadReport) -> dict[str, tuple[str, str]]:
    return {item.path: (item.outcome, item.message) for item in report.items}


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


# --- texts, documents and how strings are read --------------------------------------


def test_raw_strings_become_documents_labelled_by_position():
    report = load_documents(["first text", "second\r\ntext\rend"])
    assert [d.content for d in report.documents] == ["first text", "second\ntext\nend"]
    assert [i.path for i in report.items] == ["<text #1>", "<text #2>"]
    assert all(i.outcome == "loaded" for i in report.items)
    doc = report.documents[0]
    assert doc.file_path is None and doc.metadata == {"source": "text"}
    assert doc.id == Document.from_text("first text").id
    assert report.items[0].doc_id == doc.id


def test_empty_and_whitespace_texts_are_skipped():
    report = load_documents(["", "  \n\t ", "real"])
    assert [i.outcome for i in report.items] == ["skipped", "skipped", "loaded"]
    assert report.items[0].message == "empty"
    assert "whitespace" in report.items[1].message
    assert len(report.documents) == 1


def test_lone_surrogates_in_a_text_are_replaced_and_counted():
    report = load_documents(["a\ud800b \ud83d\ude00 c"])  # one lone surrogate, one pair
    assert report.items[0].outcome == "loaded_with_replacements"
    assert report.items[0].message == "1 lone surrogate(s) replaced with U+FFFD"
    assert report.documents[0].content == "a\ufffdb 😀 c"


def test_documents_pass_through_unchanged():
    doc = Document.from_text("given\r\nas is", file_path="x.md", source="api")
    report = load_documents([doc])
    assert report.documents == [doc]
    assert report.items[0].path == "x.md"


def test_a_missing_path_fails(tmp_path):
    report = load_documents([Path("missing.md"), tmp_path / "nope", tmp_path / "gone.txt"])
    assert [i.outcome for i in report.items] == ["failed", "failed", "failed"]
    assert all("not found" in i.message for i in report.items)
    assert report.documents == []


def test_strings_are_texts_even_when_they_look_like_paths(tmp_path):
    """Nothing is guessed, because a guess can pick the wrong file: "Q3/Q4" once failed as a missing file."""
    write(tmp_path / "a.txt", "file content")
    texts = ["Q3/Q4", "notes.md", "Please read README.md", str(tmp_path / "a.txt"), "docs/"]
    report = load_documents(texts)
    assert [i.outcome for i in report.items] == ["loaded"] * len(texts)
    assert [d.content for d in report.documents] == texts


def test_items_are_json_serialisable_for_the_cli(tmp_path):
    write(tmp_path / "a.md", "x")
    report = load_documents([tmp_path, "text"])
    json.dumps([item.__dict__ for item in report.items])
    assert report.counts() == {"loaded": 2}
    assert report.problems == []


# --- files ----------------------------------------------------------------------------


def test_text_files_load_with_their_path_and_normalised_newlines(tmp_path):
    write(tmp_path / "a.txt", b"one\r\ntwo\rthree\n")
    write(tmp_path / "b.markdown", "# Title\n")
    write(tmp_path / "c.MD", "upper-case extension\n")
    report = load_documents([tmp_path / "a.txt", tmp_path / "b.markdown", tmp_path / "c.MD"])
    assert [i.outcome for i in report.items] == ["loaded"] * 3
    a = report.documents[0]
    assert a.content == "one\ntwo\nthree\n"
    assert a.file_path == (tmp_path / "a.txt").as_posix()
    # The absolute path, for finding the file again from any folder (``ragkit delete PATH``).
    assert a.metadata == {"source": "file", "ragkit_source_path": (tmp_path / "a.txt").as_posix()}


def test_file_paths_are_as_given_joined_with_the_path_inside_the_folder(tmp_path, monkeypatch):
    write(tmp_path / "docs" / "guide" / "intro.md", "intro")
    monkeypatch.chdir(tmp_path)
    relative = load_documents([Path("./docs/")])
    assert [d.file_path for d in relative.documents] == ["docs/guide/intro.md"]
    absolute = load_documents([tmp_path / "docs"])
    assert [d.file_path for d in absolute.documents] == [f"{tmp_path.as_posix()}/docs/guide/intro.md"]
    # The id depends on the content only.
    assert relative.documents[0].id == absolute.documents[0].id == Document.from_text("intro").id


def test_bom_is_removed_and_chooses_the_encoding(tmp_path):
    text = "Grüße, 世界 🙂\nline two"
    files = {
        "utf8.txt": codecs.BOM_UTF8 + text.encode("utf-8"),
        "utf16le.txt": codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
        "utf16be.txt": codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
        "utf32le.txt": codecs.BOM_UTF32_LE + text.encode("utf-32-le"),
        "crlf16.txt": codecs.BOM_UTF16_LE + text.replace("\n", "\r\n").encode("utf-16-le"),
    }
    for name, data in files.items():
        write(tmp_path / name, data)
    report = load_documents([tmp_path / name for name in files])
    # All five decode to one text, so they are one document; the rest are duplicates.
    assert [i.outcome for i in report.items] == ["loaded"] + ["skipped"] * (len(files) - 1)
    assert report.items[0].message == "UTF-8 with byte order mark"
    assert [d.content for d in report.documents] == [text]
    assert [i.doc_id for i in report.items] == [report.documents[0].id] * len(files)


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    write(tmp_path / "latin1.txt", "café crème, naïve\n".encode("latin-1"))
    write(tmp_path / "truncated.txt", "ok 世".encode("utf-8")[:-1] + b" end")
    report = load_documents([tmp_path / "latin1.txt", tmp_path / "truncated.txt"])
    items = by_path(report)
    latin1 = items[(tmp_path / "latin1.txt").as_posix()]
    assert latin1 == ("loaded_with_replacements", "3 invalid UTF-8 byte(s) replaced with U+FFFD")
    truncated = items[(tmp_path / "truncated.txt").as_posix()]
    assert truncated == ("loaded_with_replacements", "2 invalid UTF-8 byte(s) replaced with U+FFFD")
    assert report.documents[0].content == "caf\ufffd cr\ufffdme, na\ufffdve\n"
    assert report.documents[1].content == "ok \ufffd end"


def test_empty_and_whitespace_only_files_are_skipped(tmp_path):
    write(tmp_path / "empty.txt", b"")
    write(tmp_path / "blank.txt", b" \r\n\t\n")
    write(tmp_path / "bom_only.txt", codecs.BOM_UTF8)
    report = load_documents([tmp_path])
    assert {Path(p).name: o for p, (o, _) in by_path(report).items()} == {
        "blank.txt": "skipped",
        "bom_only.txt": "skipped",
        "empty.txt": "skipped",
    }
    assert by_path(report)[(tmp_path / "empty.txt").as_posix()][1] == "empty file"
    assert report.documents == []


def test_binary_files_are_skipped(tmp_path):
    rng = random.Random(4)
    write(tmp_path / "nul.txt", b"looks like text\x00but is not")
    write(tmp_path / "controls.txt", bytes(rng.choice(range(1, 9)) for _ in range(2000)))
    noise = bytes(rng.randrange(1, 256) for _ in range(4000))
    write(tmp_path / "noise.txt", noise)
    report = load_documents([tmp_path])
    items = {Path(p).name: v for p, v in by_path(report).items()}
    assert items["nul.txt"] == ("skipped", "binary file: contains NUL bytes")
    assert items["controls.txt"] == ("skipped", "binary file: mostly control characters")
    assert items["noise.txt"][0] == "skipped" and items["noise.txt"][1].startswith("binary file:")
    assert report.documents == []


def test_text_with_a_few_controls_and_ansi_colours_is_still_text(tmp_path):
    write(tmp_path / "build.log", "\x1b[32mok\x1b[0m step 1\n\x0cpage two\tcolumn\n" * 20)
    report = load_documents([tmp_path / "build.log"])
    assert report.items[0].outcome == "loaded"


def test_unsupported_types_are_skipped_with_the_allowlist(tmp_path):
    # (PDF has a loader now, ragkit/loaders: .bin stands for a type nothing reads.)
    write(tmp_path / "paper.bin", b"plain words")
    write(tmp_path / "Makefile", b"all:\n")
    report = load_documents([tmp_path / "paper.bin", tmp_path / "Makefile"])
    assert [i.outcome for i in report.items] == ["skipped", "skipped"]
    assert "unsupported file type '.bin'" in report.items[0].message
    assert ".md" in report.items[0].message and ".txt" in report.items[0].message
    assert "without an extension" in report.items[1].message
    custom = load_documents([tmp_path / "Makefile", tmp_path / "paper.bin"], extensions={"", ".BIN"})
    assert [i.outcome for i in custom.items] == ["loaded", "loaded"]


def test_the_allowlist_covers_markdown_and_plain_text():
    assert {".txt", ".md", ".markdown"} <= TEXT_EXTENSIONS
    assert ".pdf" not in TEXT_EXTENSIONS and ".png" not in TEXT_EXTENSIONS


def test_same_content_twice_is_one_document(tmp_path):
    write(tmp_path / "a.txt", "same")
    write(tmp_path / "b.txt", "same")
    report = load_documents([tmp_path, "same", tmp_path / "a.txt"])
    assert len(report.documents) == 1
    outcomes = [(Path(i.path).name, i.outcome, i.message) for i in report.items]
    a = (tmp_path / "a.txt").as_posix()
    assert outcomes == [
        ("a.txt", "loaded", "UTF-8"),
        ("b.txt", "skipped", f"duplicate: same content as {a}"),
        ("<text #2>", "skipped", f"duplicate: same content as {a}"),
        ("a.txt", "skipped", "given more than once"),
    ]


# --- races and permissions ----------------------------------------------------------------


def test_a_file_that_vanishes_after_listing_fails_and_the_rest_load(tmp_path, monkeypatch):
    write(tmp_path / "a.txt", "first")
    write(tmp_path / "b.txt", "second")
    write(tmp_path / "c.txt", "third")
    real = load_mod._read_bytes  # the private read seam, wrapped to make the race deterministic

    def read_and_delete_the_next(path: Path) -> bytes:
        if path.name == "a.txt":
            (tmp_path / "b.txt").unlink()  # listed already, gone before its turn
        return real(path)

    monkeypatch.setattr(load_mod, "_read_bytes", read_and_delete_the_next)
    report = load_documents([tmp_path])
    items = {Path(p).name: v for p, v in by_path(report).items()}
    assert items["a.txt"][0] == items["c.txt"][0] == "loaded"
    assert items["b.txt"][0] == "failed" and items["b.txt"][1].startswith("vanished")
    assert [d.content for d in report.documents] == ["first", "third"]


def test_a_file_that_vanishes_mid_read_fails(tmp_path, monkeypatch):
    path = write(tmp_path / "a.txt", "text")

    def vanish(p: Path) -> bytes:
        p.unlink()
        raise FileNotFoundError(2, "No such file or directory", str(p))

    monkeypatch.setattr(load_mod, "_read_bytes", vanish)
    report = load_documents([path])
    assert report.items[0].outcome == "failed"
    assert report.items[0].message.startswith("vanished")


def test_a_file_that_changes_once_is_read_again(tmp_path, monkeypatch):
    path = write(tmp_path / "growing.txt", "part one")
    real = load_mod._read_bytes  # the private read seam, wrapped to make the race deterministic
    calls: list[int] = []

    def grows_during_first_read(p: Path) -> bytes:
        data = real(p)
        calls.append(1)
        if len(calls) == 1:
            with open(p, "ab") as fh:
                fh.write(b" and part two")
        return data

    monkeypatch.setattr(load_mod, "_read_bytes", grows_during_first_read)
    report = load_documents([path])
    assert len(calls) == 2
    assert report.items[0].outcome == "loaded"
    assert report.documents[0].content == "part one and part two"


def test_a_file_that_keeps_changing_fails(tmp_path, monkeypatch):
    path = write(tmp_path / "busy.log", "line\n")
    write(tmp_path / "calm.txt", "calm")
    real = load_mod._read_bytes  # the private read seam, wrapped to make the race deterministic

    def always_growing(p: Path) -> bytes:
        data = real(p)
        if p.name == "busy.log":
            with open(p, "ab") as fh:
                fh.write(b"line\n")
        return data

    monkeypatch.setattr(load_mod, "_read_bytes", always_growing)
    report = load_documents([tmp_path])
    items = {Path(p).name: v for p, v in by_path(report).items()}
    assert items["busy.log"][0] == "failed" and "changed while being read" in items["busy.log"][1]
    assert items["calm.txt"][0] == "loaded"
    assert path.read_bytes() == b"line\n" * 3


def test_a_replaced_file_is_read_again(tmp_path, monkeypatch):
    """An editor saving atomically swaps the inode; the second read sees the new file."""
    path = write(tmp_path / "doc.md", "old version")
    real = load_mod._read_bytes  # the private read seam, wrapped to make the race deterministic
    calls: list[int] = []

    def replaced_during_first_read(p: Path) -> bytes:
        data = real(p)
        calls.append(1)
        if len(calls) == 1:
            write(tmp_path / "tmp.md", "new version")
            os.replace(tmp_path / "tmp.md", p)
        return data

    monkeypatch.setattr(load_mod, "_read_bytes", replaced_during_first_read)
    report = load_documents([path])
    assert report.documents[0].content == "new version"


def test_permission_denied_fails_and_the_run_goes_on(tmp_path, monkeypatch):
    write(tmp_path / "secret.txt", "secret")
    write(tmp_path / "open.txt", "open")
    real = load_mod._read_bytes  # the private read seam, wrapped to make the race deterministic

    def refuse_secret(p: Path) -> bytes:
        if p.name == "secret.txt":
            raise PermissionError(13, "Permission denied", str(p))
        return real(p)

    monkeypatch.setattr(load_mod, "_read_bytes", refuse_secret)
    report = load_documents([tmp_path])
    items = {Path(p).name: v for p, v in by_path(report).items()}
    assert items["secret.txt"] == ("failed", "permission denied")
    assert items["open.txt"][0] == "loaded"


@needs_unprivileged
def test_permission_denied_on_real_files_and_folders(tmp_path):
    secret = write(tmp_path / "secret.txt", "secret")
    locked = tmp_path / "locked"
    write(locked / "inside.txt", "inside")
    write(tmp_path / "open.txt", "open")
    secret.chmod(0)
    locked.chmod(0)
    try:
        report = load_documents([tmp_path])
    finally:
        secret.chmod(0o644)
        locked.chmod(0o755)
    items = {Path(p).name: v for p, v in by_path(report).items()}
    assert items["secret.txt"] == ("failed", "permission denied")
    assert items["locked"] == ("failed", "permission denied listing the folder")
    assert items["open.txt"][0] == "loaded"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_skipped_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")  # reading it would block forever
    write(tmp_path / "a.txt", "a")
    report = load_documents([tmp_path, tmp_path / "pipe.txt"])
    pipe = (tmp_path / "pipe.txt").as_posix()
    assert [i for i in report.items if i.path == pipe][0].outcome == "skipped"
    assert all(i.outcome == "skipped" for i in report.items if i.path == pipe)


# --- folders ------------------------------------------------------------------------------------


def test_folders_are_walked_in_sorted_order_skipping_hidden_entries(tmp_path):
    for rel in ["b.md", "a/z.txt", "a/b/c.md", "A.txt", ".hidden.md", ".git/config.txt", "a/.cache/x.md"]:
        write(tmp_path / "root" / rel, rel)
    report = load_documents([tmp_path / "root"])
    root = (tmp_path / "root").as_posix()
    assert [d.file_path for d in report.documents] == [
        f"{root}/A.txt", f"{root}/a/b/c.md", f"{root}/a/z.txt", f"{root}/b.md"
    ]
    assert all(i.outcome == "loaded" for i in report.items)
    explicit = load_documents([tmp_path / "root" / ".hidden.md"])
    assert explicit.items[0].outcome == "loaded"


def test_unsupported_files_in_a_folder_are_summed_up_in_one_item(tmp_path):
    write(tmp_path / "notes.md", "notes")
    for name in ["a.png", "b.png", "c.exe", "LICENSE"]:
        write(tmp_path / name, b"\x89PNG")
    report = load_documents([tmp_path])
    summary = [i for i in report.items if i.path == tmp_path.as_posix()]
    assert len(summary) == 1 and summary[0].outcome == "skipped"
    assert summary[0].message.startswith("4 file(s) of unsupported types not loaded: (no extension) (1), .exe (1), .png (2)")


def test_an_empty_folder_is_reported(tmp_path):
    (tmp_path / "empty").mkdir()
    write(tmp_path / "empty" / ".hidden.txt", "hidden")
    report = load_documents([tmp_path / "empty"])
    assert report.items[0].outcome == "skipped" and "no files found" in report.items[0].message


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks here")
def test_symlink_loops_are_reported_and_not_followed_twice(tmp_path):
    root = tmp_path / "root"
    write(root / "a.md", "a")
    write(root / "sub" / "b.md", "b")
    (root / "sub" / "up").symlink_to("..")  # loop back to root
    (root / "sub" / "deeper").symlink_to("../sub")  # loop back to sub
    (root / "zalias").symlink_to("sub")  # a second way to the same folder, listed after it
    (root / "self.md").symlink_to("self.md")  # a link to itself
    (root / "dangling.md").symlink_to("nowhere.md")
    (root / "link.md").symlink_to("a.md")  # the same file again
    report = load_documents([root])
    items = {p.removeprefix(root.as_posix() + "/"): v for p, v in by_path(report).items()}
    assert [d.content for d in report.documents] == ["a", "b"]
    assert items["a.md"][0] == items["sub/b.md"][0] == "loaded"
    assert items["zalias"] == ("skipped", f"already loaded as {root.as_posix()}/sub; not followed again")
    assert items["sub/up"] == ("skipped", f"symlink loop: leads back to {root.as_posix()}; not followed again")
    assert items["sub/deeper"][1].startswith("symlink loop: leads back to")
    assert items["self.md"] == ("failed", "symlink loop: the link points (indirectly) to itself")
    assert items["dangling.md"] == ("failed", "broken symlink: target 'nowhere.md' does not exist")
    assert items["link.md"] == ("skipped", f"same file as {root.as_posix()}/a.md (link)")


def test_a_folder_of_three_thousand_files_loads_fast_and_in_order(tmp_path):
    root = tmp_path / "many"
    for d in range(30):
        folder = root / f"dir{d:02d}"
        folder.mkdir(parents=True)
        for f in range(100):
            (folder / f"note{f:03d}.md").write_text(f"# Note {d}-{f}\n\nSome text for note {d}-{f}.\n")
    started = time.perf_counter()
    report = load_documents([root])
    elapsed = time.perf_counter() - started
    assert len(report.documents) == 3000
    assert report.counts() == {"loaded": 3000}
    paths = [d.file_path for d in report.documents]
    assert paths == sorted(paths)
    assert elapsed < 2.0, f"loading 3,000 small files took {elapsed:.2f}s"


def test_max_files_stops_reading_and_says_so(tmp_path):
    for i in range(10):
        write(tmp_path / "docs" / f"{i}.txt", f"text {i}")
    write(tmp_path / "more.txt", "more")
    report = load_documents([tmp_path / "docs", tmp_path / "more.txt", "a text still loads"], max_files=4)
    assert [d.content for d in report.documents] == ["text 0", "text 1", "text 2", "text 3", "a text still loads"]
    limited = [i for i in report.items if "max_files=4 reached" in i.message]
    assert [i.path for i in limited] == [(tmp_path / "docs").as_posix(), (tmp_path / "more.txt").as_posix()]
    with pytest.raises(ValueError):
        load_documents([], max_files=-1)


def test_loading_is_deterministic(tmp_path):
    for i in range(50):
        write(tmp_path / f"d{i % 5}" / f"{i}.md", f"document {i}\n" * (i + 1))
    first = load_documents([tmp_path, "text"])
    second = load_documents([tmp_path, "text"])
    assert [d.id for d in first.documents] == [d.id for d in second.documents]
    assert [i.__dict__ for i in first.items] == [i.__dict__ for i in second.items]


# --- file names that are not UTF-8 ---------------------------------------------------------


def byte_name(folder: Path, raw: bytes) -> Path:
    """``folder/raw`` as Python names it (undecodable bytes as lone surrogates)."""
    path = Path(os.fsdecode(os.fsencode(folder) + b"/" + raw))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        path.unlink()
    except OSError as exc:  # e.g. macOS file systems refuse such names
        pytest.skip(f"this file system refuses non-UTF-8 names: {exc}")
    return path


def test_a_name_that_is_not_utf8_fails_alone_and_the_rest_load(tmp_path):
    """printf x > "$(printf 'd/bad\\xff.txt')": that file fails, named in a form that
    prints and stores; a folder so named is not entered; good files load."""
    d = tmp_path / "d"
    write(d / "good.txt", "Alice met Bob in Paris.")
    write(byte_name(d, b"bad\xff.txt"), "x")
    write(byte_name(d, b"dir\xfe") / "inside.txt", "Carol")
    write(byte_name(d, b"img\xff.png"), b"\x89PNG")  # unsupported: only counted, as any other
    write(d / "sub" / "ok.md", "Dave")
    report = load_documents([d])
    root = d.as_posix()
    assert [doc.file_path for doc in report.documents] == [f"{root}/good.txt", f"{root}/sub/ok.md"]
    items = by_path(report)
    for shown in (f"{root}/bad\\xff.txt", f"{root}/dir\\xfe"):
        outcome, message = items[shown]
        assert outcome == "failed" and "not valid UTF-8" in message and "rename" in message
    assert items[root] == ("skipped", items[root][1]) and items[root][1].startswith("1 file(s) of unsupported types")
    # Every path and message is plain UTF-8: printable, storable, JSON-able.
    json.dumps([i.__dict__ for i in report.items], ensure_ascii=False).encode("utf-8")


def test_a_non_utf8_name_given_directly_fails_with_its_bytes_shown(tmp_path):
    bad = write(byte_name(tmp_path, b"caf\xe9.txt"), "latin-1 named")
    good = write(tmp_path / "good.txt", "fine")
    report = load_documents([bad, good])
    assert [d.file_path for d in report.documents] == [good.as_posix()]
    assert report.items[0].path == tmp_path.as_posix() + "/caf\\xe9.txt"
    assert report.items[0].outcome == "failed"


def test_a_path_with_a_nul_character_fails_clearly():
    report = load_documents([Path("a\x00b.txt"), "text"])
    assert report.items[0] == load_mod.LoadItem(
        "a\\x00b.txt", "failed", "the path contains a NUL character, which no file name can hold"
    )
    assert [d.content for d in report.documents] == ["text"]


def test_files_read_in_parallel_give_the_report_of_files_read_in_turn(tmp_path):
    """``submit``: reads that finish in any order (a pool of threads, the
    later files first) give the report and documents of ``run``, in input
    order: duplicates, failures and skips included."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ragkit.testing.documents import corrupt, write_docx, write_pdf

    folder = tmp_path / "in"
    folder.mkdir()
    page = [("h1", "Depot"), ("p", "Depot 4 ships spare parts north every week.")]
    write_pdf(folder / "a.pdf", [page])
    write_docx(folder / "b.docx", [page])
    corrupt(write_pdf(folder / "c.pdf", [page]))
    write(folder / "d.txt", "Notes about depot 5.")
    write(folder / "e.pdf", (folder / "a.pdf").read_bytes())  # a duplicate of a.pdf
    write(folder / "f.html", "<html><body><p>Depot 6 closes in May.</p></body></html>")
    gate = threading.Event()  # the first file's read waits until the last one was submitted
    submitted: list[str] = []

    with ThreadPoolExecutor(4) as pool:
        def read(loader, data, name):
            if name == "a.pdf":
                assert gate.wait(10)
            return loader.load(data, name)

        def submit(loader, data, name):
            submitted.append(name)
            if name == "f.html":
                gate.set()
            return pool.submit(read, loader, data, name).result

        parallel = load_documents([folder], submit=submit)
    in_turn = load_documents([folder])
    assert gate.is_set() and len(submitted) == 5
    assert parallel.items == in_turn.items
    assert [d.model_dump() for d in parallel.documents] == [d.model_dump() for d in in_turn.documents]
    assert [i.outcome for i in in_turn.items] == ["loaded", "loaded", "failed", "loaded", "skipped", "loaded"]
