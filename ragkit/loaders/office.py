"""Word, PowerPoint and Excel files (python-docx, python-pptx, openpyxl).

All three are ZIP packages (OOXML); ``sniff`` tells them apart by the main part
the package holds, so a document named wrongly is still read by the right loader.
A damaged package fails with "re-save it"; it never stops the run.

The libraries open the package themselves, so ``load`` first streams every
entry through ``SafeZip`` (``ragkit.loaders.archive`` says what that stops):
a package over the ``[loaders]`` bounds, or with an XML part declaring
entities, fails before a library reads it.
"""

from __future__ import annotations

import io
import zipfile

from ragkit.loaders.archive import SafeZip, entry_bound
from ragkit.loaders.base import Loaded, Loader, LoaderError, TextBuilder


OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""Compound File Binary: 97-2003 Office files, and encrypted OOXML ones."""


def ooxml_part(data: bytes, max_entries: int = 10_000) -> str | None:
    """``word``, ``ppt`` or ``xl``: the kind of OOXML package ``data`` is, or
    ``None`` (also for a zip of more than ``max_entries`` entries, whose
    directory is not read; its extension still finds the loader, which says why)."""
    if not data.startswith(b"PK\x03\x04") or entry_bound(data) > max_entries:
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):
        return None
    if "[Content_Types].xml" not in names:
        return None
    for part in ("word/document.xml", "ppt/presentation.xml", "xl/workbook.xml"):
        if part in names:
            return part.split("/")[0]
    return None


def _damaged(kind: str, exc: Exception) -> LoaderError:
    return LoaderError(
        f"corrupt {kind} file ({type(exc).__name__}: {str(exc)[:120]}): it is not a complete ZIP-based "
        f"Office document; open and re-save it in {kind} or LibreOffice, or export it again"
    )


class _Office(Loader):
    part: str = ""
    kind: str = ""

    def sniff(self, data: bytes) -> bool:
        return ooxml_part(data, self.limits.max_entries) == self.part

    def load(self, data: bytes, name: str) -> Loaded:
        if data.startswith(OLE_MAGIC):
            # Password-protected OOXML files are wrapped in an OLE container, as are 97-2003 files.
            raise LoaderError(
                f"password-protected or old-format (97-2003) {self.kind} file: remove the password, or "
                f"save it as {self.extensions[0]} in {self.kind} or LibreOffice, and index the copy"
            )
        try:
            with SafeZip(data, self.limits) as package:
                package.verify(xml=_parsed_as_xml)
            return self.read(io.BytesIO(data))
        except LoaderError:
            raise
        except Exception as exc:  # the libraries raise many kinds on a damaged package
            raise _damaged(self.kind, exc) from None

    def read(self, stream: io.BytesIO) -> Loaded:
        raise NotImplementedError


def _parsed_as_xml(name: str) -> bool:
    """The parts the libraries parse as XML are named so by OPC convention."""
    return name.lower().endswith((".xml", ".rels"))


class DocxLoader(_Office):
    name = "docx"
    description = "Word documents: paragraphs under their heading path, tables as rows (python-docx)"
    extensions = (".docx",)
    media_types = ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",)
    requires = ("docx",)
    part, kind = "word", "Word"

    def read(self, stream: io.BytesIO) -> Loaded:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        document = docx.Document(stream)
        builder, headings = TextBuilder(), []
        # Word has no pages in the file (layout makes them); explicit page breaks count.
        page = 1
        for block in document.iter_inner_content():
            if isinstance(block, Paragraph):
                level = _heading_level(block.style.name if block.style is not None else "")
                if level:
                    headings = [*headings[: level - 1], block.text.strip()]
                builder.add(block.text, page=page, section=" > ".join(h for h in headings if h) or None)
                page += len(block._p.xpath('.//w:br[@w:type="page"]'))
            elif isinstance(block, Table):
                builder.add(_table_text([[c.text for c in row.cells] for row in block.rows]),
                            page=page, section=" > ".join(h for h in headings if h) or None)
        if builder.empty:
            raise LoaderError("the Word document has no text")
        return Loaded(builder.text(), builder.segments, "page", page)


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    if style.startswith("Heading "):
        try:
            return max(1, int(style.split()[1]))
        except ValueError:
            return 0
    return 0


def _table_text(rows: list[list[str]]) -> str:
    """Rows as lines, each cell named by its column's header: a row is readable alone."""
    rows = [[" ".join(str(c).split()) for c in row] for row in rows if any(str(c).strip() for c in row)]
    if not rows:
        return ""
    header, lines = rows[0], []
    if len(rows) == 1:
        return " | ".join(header)
    for row in rows[1:]:
        cells = [f"{h}: {v}" if h else v for h, v in zip(header, row) if v]
        lines.append("; ".join(cells))
    return "\n".join(lines)


class PptxLoader(_Office):
    name = "pptx"
    description = "PowerPoint slides: titles, text frames, tables and notes (python-pptx)"
    extensions = (".pptx",)
    media_types = ("application/vnd.openxmlformats-officedocument.presentationml.presentation",)
    requires = ("pptx",)
    part, kind = "ppt", "PowerPoint"

    def read(self, stream: io.BytesIO) -> Loaded:
        import pptx

        deck = pptx.Presentation(stream)
        builder = TextBuilder()
        for number, slide in enumerate(deck.slides, start=1):
            title = slide.shapes.title.text_frame.text.strip() if slide.shapes.title is not None else ""
            for shape in slide.shapes:
                if shape.has_text_frame:
                    builder.add(shape.text_frame.text, page=number, section=title or None)
                elif getattr(shape, "has_table", False) and shape.has_table:
                    rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
                    builder.add(_table_text(rows), page=number, section=title or None)
            if slide.has_notes_slide:
                builder.add(slide.notes_slide.notes_text_frame.text, page=number, section=title or None)
        if builder.empty:
            raise LoaderError("the presentation has no text")
        return Loaded(builder.text(), builder.segments, "slide", len(deck.slides))


class XlsxLoader(_Office):
    name = "xlsx"
    description = "Excel workbooks: each sheet's rows as text with the headers repeated (openpyxl)"
    extensions = (".xlsx", ".xlsm")
    media_types = ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",)
    requires = ("openpyxl", "defusedxml")  # openpyxl parses sheets with the standard library's XML
    # parser, which expands entities (up to 100-fold); with defusedxml installed it forbids them.
    part, kind = "xl", "Excel"

    def read(self, stream: io.BytesIO) -> Loaded:
        import openpyxl

        if not openpyxl.DEFUSEDXML:
            raise LoaderError("openpyxl is running without defusedxml (OPENPYXL_DEFUSEDXML is set to something "
                              "other than True), so its XML parser would expand entities: unset OPENPYXL_DEFUSEDXML")

        # read_only streams the rows instead of building every cell object.
        book = openpyxl.load_workbook(stream, read_only=True, data_only=True)
        builder = TextBuilder()
        try:
            for number, sheet in enumerate(book.worksheets, start=1):
                rows = [["" if v is None else str(v) for v in row] for row in sheet.iter_rows(values_only=True)]
                for piece in row_blocks(rows):
                    builder.add(piece, page=number, section=sheet.title)
            sheets = len(book.worksheets)
        finally:
            book.close()
        if builder.empty:
            raise LoaderError("the workbook has no cell values")
        return Loaded(builder.text(), builder.segments, "sheet", sheets)


def row_blocks(rows: list[list[str]], per_block: int = 20) -> list[str]:
    """The header row, then the other rows ``per_block`` at a time, each row with its headers."""
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return []
    header = rows[0]
    if len(rows) == 1:
        return [" | ".join(header)]
    return [_table_text([header, *rows[i:i + per_block]]) for i in range(1, len(rows), per_block)]
