"""The load stage: texts, files and folders to ``Document``s, with a report.

Every input gets at least one ``LoadItem`` saying what happened to it, and a bad
input never stops the run: the other inputs are still loaded.

Rules (decisions, in one place):

- Inputs: the type says what an input is, nothing is guessed: a ``Document``
  passes through, a ``Path`` (any ``os.PathLike``) is a file or folder, a
  ``str`` is a text to index (``"Q3/Q4"`` and ``"notes.md"`` included). Callers
  holding path strings wrap them in ``Path`` (``RAG.insert(paths=...)`` and the
  CLI do).
- Files load when their extension is in ``TEXT_EXTENSIONS`` or a loader's
  (``ragkit.loaders``: PDF, Office, HTML, CSV, EPUB; case-insensitive); others
  are skipped. A loader is chosen by the file's bytes first (a PDF named
  ``.txt`` is read as a PDF), then by its extension; its document keeps the
  pages and sections it found (``Document.segments``). A file its loader cannot
  read (encrypted, scanned, damaged) fails alone with the cause and the fix; a
  loader whose library is missing says which extra to install, and HTML or CSV
  then load as plain text. Inside a folder those are summed up in one item per folder
  input, so a folder of images does not bury the report.
- A file over the ``[loaders]`` bounds (``limits``: how far a zip-based file
  may inflate, ``ragkit.loaders.archive``) fails alone naming the bound. How a
  loader is run is the caller's (``run``): in this process by default, in a
  child process with memory and time limits for the server
  (``ragkit.pipeline.load_isolated``).
- Folders are walked depth-first with the entries of each folder sorted by name,
  so the order of documents is the same on every run and machine. Hidden
  entries (name starts with ".") are ignored inside folders, but a hidden path
  given explicitly is loaded. Symlinks are followed; a folder or file reached a
  second time (symlink loop, two links to one target, hard link) is reported
  and not loaded again.
- ``Document.file_path`` is the path as the user gave it, joined with the path
  inside the folder, in POSIX form (``docs/guide/intro.md``); it is not resolved,
  so it stays meaningful to the user and the same on every machine for relative
  inputs. Document ids depend on the content only. The file's absolute path
  (normalised, symlinks kept) goes in ``metadata[SOURCE_PATH]``, resolved once
  here in the folder the load ran in: ``ragkit delete`` and re-indexing find the
  file by it from any other folder (``ragkit.pipeline.identity``).
- Text: decoded by ``ragkit.loaders.text`` (a byte order mark picks UTF-8,
  UTF-16 or UTF-32; other files are UTF-8, invalid bytes replaced by U+FFFD and
  counted; newlines become ``\\n``; nothing else is altered).
- Two inputs with the same content are one document (ids are content-derived);
  the second is reported as a duplicate.
- A file or folder name that is not valid UTF-8 (Python sees its bytes as lone
  surrogates) fails, alone: no store, tokenizer or JSON report could hold the
  path. The item shows the name with ``\\xff`` escapes and says to rename it; a
  folder so named is not entered. Other files load as usual.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ragkit.core.text import shown_name
from ragkit.loaders import Loaded, Loader, LoaderError, MissingDependency, detect
from ragkit.loaders.limits import LoaderLimits
from ragkit.loaders.registry import extensions as loader_extensions
from ragkit.loaders.text import TEXT_EXTENSIONS, decode, normalize_text
from ragkit.pipeline.identity import SOURCE_PATH
from ragkit.schema import Document

RunLoader = Callable[[Loader, bytes, str], Loaded]
SubmitLoader = Callable[[Loader, bytes, str], Callable[[], Loaded]]

Outcome = Literal["loaded", "loaded_with_replacements", "loaded_with_warnings", "skipped", "failed"]


@dataclass
class LoadItem:
    """What happened to one input, or to one file inside a folder input."""

    path: str
    """The file path as stored in the document, or ``<text #n>`` / ``<document #n>``
    for the n-th input (1-based)."""
    outcome: Outcome
    message: str = ""
    doc_id: str | None = None
    pages: int | None = None
    """Pages (slides, sheets) of a file read by a loader that counts them."""
    characters: int | None = None
    """Characters of text the document holds."""


@dataclass
class LoadReport:
    documents: list[Document] = field(default_factory=list)
    items: list[LoadItem] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(Counter(item.outcome for item in self.items))

    @property
    def problems(self) -> list[LoadItem]:
        return [item for item in self.items if item.outcome != "loaded"]


def load_documents(
    inputs: Iterable[str | Path | Document],
    *,
    max_files: int | None = None,
    extensions: Collection[str] = TEXT_EXTENSIONS,
    limits: LoaderLimits | None = None,
    run: RunLoader | None = None,
    submit: SubmitLoader | None = None,
) -> LoadReport:
    """Load every input; ``max_files`` caps how many files are read in total.
    ``limits``: the ``[loaders]`` bounds (default: their defaults). ``run(loader,
    data, name)`` reads one file's bytes with its loader, raising ``LoaderError``
    for a file it cannot read (default: ``loader.load`` in this process).
    ``submit(loader, data, name)`` instead starts that read and returns the wait
    for it (an executor's workers read files in parallel, ``ragkit.executors``);
    the report is the same, in input order, either way."""
    if max_files is not None and max_files < 0:
        raise ValueError(f"max_files must be >= 0, got {max_files}")
    walker = _InputWalker(
        max_files, frozenset(e.lower() for e in extensions), limits or LoaderLimits(), submit or _here(run or _run)
    )
    for n, item in enumerate(inputs, start=1):
        if isinstance(item, Document):
            walker.add_text(item.content, item.file_path or f"<document #{n}>", document=item)
        elif isinstance(item, os.PathLike):
            walker.add_path(Path(item))
        elif isinstance(item, str):
            walker.add_raw_text(item, f"<text #{n}>")
        else:
            walker.item(f"<input #{n}>", "failed", f"not a text, path or Document: {type(item).__name__}")
    return walker.finish()


# --- reading and decoding --------------------------------------------------------


class _Unstable(Exception):
    """The file changed while it was being read, twice in a row."""


def _read_bytes(path: Path) -> bytes:
    # One seam for tests that simulate races (a file vanishing or growing mid-read).
    with open(path, "rb") as fh:
        return fh.read()


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _read_stable(path: Path) -> tuple[bytes, os.stat_result]:
    """Read a file whose size, mtime and inode did not change during the read.

    A file being written (or atomically replaced) is read once more; if it is
    still moving the caller reports it rather than index half a file.
    """
    for _ in range(2):
        before = os.stat(path)
        data = _read_bytes(path)
        after = os.stat(path)
        if _signature(before) == _signature(after) and len(data) == after.st_size:
            return data, after
    raise _Unstable


# --- the walk ----------------------------------------------------------------------


@dataclass
class _Folder:
    shown: str
    entries: Iterator[os.DirEntry]
    ancestors: tuple[tuple[int, int], ...]


def _run(loader: Loader, data: bytes, name: str) -> Loaded:
    return loader.load(data, name)


def _here(run: RunLoader) -> SubmitLoader:
    """``run`` as a submit: read at once; the wait gives the result or raises."""

    def submit(loader: Loader, data: bytes, name: str) -> Callable[[], Loaded]:
        try:
            loaded = run(loader, data, name)
        except Exception as exc:  # raised at the wait, where a remote read's error is
            return functools.partial(_raise, exc)
        return lambda: loaded

    return submit


def _raise(exc: Exception) -> Loaded:
    raise exc


class _InputWalker:
    """Walks the inputs (texts, files, folders) into documents and report items.
    It reads no file type itself: text goes to ``ragkit.loaders.text``, other
    types to the loader that claims them (``ragkit.loaders``).

    The walk records what to report as ``ops``, run in order by ``finish``: a
    file read elsewhere (``submit``) is waited for there, so reads overlap
    while the report keeps the inputs' order (duplicates included). Each op
    adds one report item."""

    def __init__(self, max_files: int | None, extensions: frozenset[str], limits: LoaderLimits,
                 submit: SubmitLoader) -> None:
        self.limits, self.submit = limits, submit
        self.report = LoadReport()
        self.ops: list[Callable[[], None]] = []
        self.max_files = max_files
        self.extensions = extensions | loader_extensions()
        self.files_read = 0
        self.doc_paths: dict[str, str] = {}
        self.file_paths: dict[tuple[int, int], str] = {}
        self.dir_paths: dict[tuple[int, int], str] = {}

    def item(self, path: str, outcome: Outcome, message: str = "", doc_id: str | None = None, **sizes) -> None:
        self.ops.append(functools.partial(self._item_now, path, outcome, message, doc_id, **sizes))

    def _item_now(self, path: str, outcome: Outcome, message: str = "", doc_id: str | None = None, **sizes) -> None:
        self.report.items.append(LoadItem(printable_path(path), outcome, message, doc_id, **sizes))

    def finish(self) -> LoadReport:
        ops, self.ops = self.ops, []
        for op in ops:
            op()
        return self.report

    @property
    def limit_reached(self) -> bool:
        return self.max_files is not None and self.files_read >= self.max_files

    def _limit_message(self) -> str:
        return f"max_files={self.max_files} reached; the remaining files were not loaded"

    # -- documents --------------------------------------------------------------

    def add_text(self, content: str, shown: str, **kwargs) -> None:
        self.ops.append(functools.partial(self._text_now, content, shown, **kwargs))

    def _text_now(
        self,
        content: str,
        shown: str,
        *,
        document: Document | None = None,
        file_path: str | None = None,
        outcome: Outcome = "loaded",
        message: str = "",
        pages: int | None = None,
        source: Path | None = None,
    ) -> None:
        if document is None:
            content = normalize_text(content)
        if not content.strip():
            self._item_now(shown, "skipped", "empty" if not content else "empty (whitespace only)")
            return
        where = {SOURCE_PATH: Path(os.path.abspath(source)).as_posix()} if source is not None else {}
        if document is None:
            document = Document.from_text(content, file_path=file_path, source="file" if file_path else "text", **where)
        elif where:
            document = document.model_copy(update={"metadata": {**document.metadata, **where}})
        first = self.doc_paths.get(document.id)
        if first is not None:
            why = "given more than once" if first == shown else f"duplicate: same content as {first}"
            self._item_now(shown, "skipped", why, document.id)
            return
        self.doc_paths[document.id] = shown
        self.report.documents.append(document)
        self._item_now(shown, outcome, message, document.id, pages=pages, characters=len(document.content))

    def add_raw_text(self, text: str, shown: str) -> None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates are not Unicode and UTF-8 cannot encode them, so no
            # store or tokenizer could take the text. Paired ones become the
            # character they stand for.
            fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            replaced = fixed.count("\ufffd") - text.count("\ufffd")
            self.add_text(fixed, shown, outcome="loaded_with_replacements",
                          message=f"{replaced} lone surrogate(s) replaced with U+FFFD")
            return
        self.add_text(text, shown)

    # -- paths --------------------------------------------------------------------

    def add_path(self, path: Path) -> None:
        shown = path.as_posix()
        if (problem := _name_problem(shown)) is not None:
            self.item(shown, "failed", problem)
            return
        if self.limit_reached:
            self.item(shown, "skipped", self._limit_message())
            return
        try:
            st = os.stat(path)
        except OSError as exc:
            self.item(shown, "failed", _missing_reason(path, exc))
            return
        if stat.S_ISDIR(st.st_mode):
            self._add_folder(path, shown)
        elif not stat.S_ISREG(st.st_mode):
            self.item(shown, "skipped", "not a regular file (device, pipe or socket)")
        elif path.suffix.lower() not in self.extensions:
            self.item(shown, "skipped", _unsupported(path.suffix, self.extensions))
        else:
            self._add_file(path, shown)

    def _add_file(self, path: Path, shown: str) -> None:
        self.files_read += 1
        try:
            data, st = _read_stable(path)
        except _Unstable:
            self.item(shown, "failed", "changed while being read (twice); load it again once it is complete")
            return
        except OSError as exc:
            self.item(shown, "failed", _missing_reason(path, exc, vanished=True))
            return
        first = self.file_paths.setdefault((st.st_dev, st.st_ino), shown)
        if first != shown:
            self.item(shown, "skipped", f"same file as {first} (link)")
            return
        if not data:
            self.item(shown, "skipped", "empty file")
            return
        note = self._add_loaded(path, shown, data)
        if note is None:
            return
        held = [data]
        del data  # decode() drops the bytes once they are text
        self._as_text(path, shown, held, note, self.add_text, self.item)

    def _as_text(self, path: Path, shown: str, held: list[bytes], note: str, text: Callable, item: Callable) -> None:
        decoded = decode(held)
        if decoded.binary:
            item(shown, "skipped", f"binary file: {decoded.binary}")
            return
        name = decoded.encoding.upper()
        if decoded.replaced:
            outcome: Outcome = "loaded_with_replacements"
            message = f"{decoded.replaced} invalid {name} byte(s) replaced with U+FFFD"
        else:
            outcome, message = "loaded", name + (" with byte order mark" if decoded.bom else "")
        if note:
            outcome, message = "loaded_with_warnings", f"{message}; {note}"
        text(decoded.text, shown, file_path=shown, outcome=outcome, message=message, source=path)

    def _add_loaded(self, path: Path, shown: str, data: bytes) -> str | None:
        """Starts reading the file with the loader that claims it (``None``:
        its op is queued), or says it is to be read as text (a note on why, or ``""``)."""

        loader = detect(shown, data)
        if loader is None:
            return ""
        try:
            loader.check_available()
        except MissingDependency as exc:
            if path.suffix.lower() in TEXT_EXTENSIONS:  # HTML, CSV: still readable as text
                return f"read as plain text: {exc}"
            self.item(shown, "failed", str(exc))
            return None
        loader.limits = self.limits
        try:
            wait = self.submit(loader, data, path.name)
        except Exception as exc:  # the executor could not take it: the file fails at its turn
            wait = functools.partial(_raise, exc)
        as_text = data if path.suffix.lower() in TEXT_EXTENSIONS else None  # kept for a late MissingDependency
        self.ops.append(functools.partial(self._loaded_now, loader, wait, path, shown, as_text))
        return None

    def _loaded_now(self, loader: Loader, wait: Callable[[], Loaded], path: Path, shown: str,
                    as_text: bytes | None) -> None:
        try:
            loaded = wait()
        except MissingDependency as exc:
            if as_text is not None:
                self._as_text(path, shown, [as_text], f"read as plain text: {exc}", self._text_now, self._item_now)
                return
            self._item_now(shown, "failed", str(exc))
            return
        except LoaderError as exc:
            self._item_now(shown, "failed", f"{loader.name}: {exc}")
            return
        except Exception as exc:  # a loader plugin's bug fails its file, not the run
            self._item_now(shown, "failed", f"loader {loader.name!r} failed: {type(exc).__name__}: {str(exc)[:200]}; "
                                            "report it to the loader's authors")
            return
        loaded.loader = loader.name
        document = loaded.document(shown)
        warned = bool(loaded.warnings)
        self._text_now(loaded.text, shown, document=document, source=path,
                       outcome="loaded_with_warnings" if warned else "loaded",
                       message="; ".join(loaded.warnings) if warned else loader.name, pages=loaded.pages)

    def _add_folder(self, root: Path, shown_root: str) -> None:
        items_before = len(self.ops)
        unsupported: Counter[str] = Counter()
        stack: list[_Folder] = []
        self._enter(root, shown_root, (), stack)
        while stack:
            folder = stack[-1]
            entry = next(folder.entries, None)
            if entry is None:
                stack.pop()
                continue
            if entry.name.startswith("."):
                continue
            path, shown = Path(entry.path), f"{folder.shown}/{entry.name}"
            try:
                is_dir, is_file = entry.is_dir(), entry.is_file()
            except OSError as exc:
                self.item(shown, "failed", _missing_reason(path, exc))
                continue
            # A file of an unsupported type is only counted, whatever its name.
            counted = is_file and path.suffix.lower() not in self.extensions
            if not counted and (problem := _name_problem(shown)) is not None:
                self.item(shown, "failed", problem)
            elif is_dir:
                self._enter(path, shown, folder.ancestors, stack)
            elif is_file:
                suffix = path.suffix.lower()
                if suffix not in self.extensions:
                    unsupported[printable_path(suffix) or "(no extension)"] += 1
                elif self.limit_reached:
                    self.item(shown_root, "skipped", self._limit_message())
                    break
                else:
                    self._add_file(path, shown)
            elif entry.is_symlink():
                self.item(shown, "failed", _missing_reason(path, None))
            else:
                self.item(shown, "skipped", "not a regular file (device, pipe or socket)")
        if unsupported:
            kinds = ", ".join(f"{ext} ({n})" for ext, n in sorted(unsupported.items()))
            self.item(
                shown_root,
                "skipped",
                f"{sum(unsupported.values())} file(s) of unsupported types not loaded: {kinds}; "
                f"loadable: {' '.join(sorted(self.extensions))}",
            )
        elif len(self.ops) == items_before:
            self.item(shown_root, "skipped", "no files found (hidden files and folders are ignored)")

    def _enter(self, path: Path, shown: str, ancestors: tuple[tuple[int, int], ...], stack: list[_Folder]) -> None:
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino)
            if key in self.dir_paths:
                first = self.dir_paths[key]
                why = "symlink loop: leads back to" if key in ancestors else "already loaded as"
                self.item(shown, "skipped", f"{why} {first}; not followed again")
                return
            self.dir_paths[key] = shown
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.item(shown, "failed", _missing_reason(path, exc, vanished=bool(ancestors), folder=True))
            return
        stack.append(_Folder(shown, iter(entries), (*ancestors, key)))


def _name_problem(path: str) -> str | None:
    """Why ``path`` cannot be a document's file path, or ``None``."""
    if "\x00" in path:
        return "the path contains a NUL character, which no file name can hold"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return (
            "name not valid UTF-8 (shown with \\x escapes): no store or report can hold the path; "
            "rename it to a UTF-8 name (e.g. with convmv) and index it again"
        )
    return None


def printable_path(path: str) -> str:
    """``path`` as UTF-8 text: the bytes of a non-UTF-8 name as ``\\xff``, NUL as
    ``\\x00``, bidirectional and invisible controls as ``\\u202e`` (``shown_name``)."""
    try:
        raw = path.encode("utf-8", "surrogateescape")  # the name's bytes on disk
    except UnicodeEncodeError:  # a lone surrogate no file system gave: from a caller's str
        raw = path.encode("utf-8", "backslashreplace")
    return shown_name(raw.decode("utf-8", "backslashreplace").replace("\x00", "\\x00"))


def _unsupported(suffix: str, extensions: frozenset[str]) -> str:
    kind = f"'{suffix}'" if suffix else "without an extension"
    return f"unsupported file type {kind}; loadable: {' '.join(sorted(extensions))}"


def _missing_reason(path: Path, exc: OSError | None, *, vanished: bool = False, folder: bool = False) -> str:
    """A user-facing reason for an OSError (``None``: a link whose target fails)."""
    if exc is None or isinstance(exc, FileNotFoundError):
        if os.path.islink(path):
            try:
                os.stat(path)
            except OSError as inner:
                if inner.errno == errno.ELOOP:
                    return "symlink loop: the link points (indirectly) to itself"
            try:
                target = repr(os.readlink(path))
            except OSError:
                target = "(unreadable)"
            return f"broken symlink: target {target} does not exist"
        if vanished:
            return "vanished: deleted or moved after it was listed, before it could be read"
        return "not found: no such file or folder"
    if isinstance(exc, PermissionError):
        return f"permission denied{' listing the folder' if folder else ''}"
    if exc.errno == errno.ELOOP:
        return "symlink loop: the link points (indirectly) to itself"
    return f"could not read: {exc.strerror or exc}"
