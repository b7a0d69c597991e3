"""Real files of every type the loaders read, written by each format's own
library (reportlab, python-docx, python-pptx, openpyxl), for the loader tests,
``scripts/make-example-docs`` and ``benchmarks/large_pdf.py``.

Content is given as pages (or slides, sheets) of blocks: ``("h1", text)``,
``("h2", text)`` or ``("p", text)``, so a test knows on which page each
sentence is.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

Block = tuple[str, str]
Page = Sequence[Block]


def write_pdf(path: Path, pages: Iterable[Page], *, encrypt: str | None = None) -> Path:
    """One PDF page per item; ``encrypt``: a user password (the file cannot be opened without it)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    # invariant=1: no timestamps or random ids, so the same content gives the same bytes.
    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=1, encrypt=encrypt)
    width, height = A4
    depth = -1  # outline levels may go one deeper at a time
    for n, page in enumerate(pages):
        y = height - 72
        for i, (style, text) in enumerate(page):
            size = {"h1": 18, "h2": 14}.get(style, 11)
            if style != "p":  # headings are bookmarks too: the PDF's outline
                depth = min(int(style[1]) - 1, depth + 1)
                pdf.bookmarkHorizontal(f"h{n}.{i}", 0, y + size)
                pdf.addOutlineEntry(text, f"h{n}.{i}", level=depth)
            pdf.setFont("Helvetica-Bold" if style != "p" else "Helvetica", size)
            for line in _wrap(text, 90 if style == "p" else 60):
                pdf.drawString(72, y, line)
                y -= size * 1.4
            y -= size * 0.6
        pdf.showPage()
    pdf.save()
    return path


def write_scanned_pdf(path: Path, pages: int = 2) -> Path:
    """Pages that are only a drawing, like a scan: no text layer."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=1)
    for _ in range(pages):
        pdf.rect(72, 72, 400, 600, fill=1)
        pdf.showPage()
    pdf.save()
    return path


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def write_docx(path: Path, pages: Iterable[Page], *, table: Sequence[Sequence[str]] | None = None) -> Path:
    """Headings as Word heading styles; a page break between pages; ``table`` at the end."""
    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    for n, page in enumerate(pages):
        if n:
            document.paragraphs[-1].add_run().add_break(WD_BREAK.PAGE)
        for style, text in page:
            if style == "p":
                document.add_paragraph(text)
            else:
                document.add_heading(text, level=int(style[1]))
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table):
            for cell, value in zip(row.cells, values):
                cell.text = value
    fixed = datetime(2025, 1, 1, tzinfo=timezone.utc)  # the same content gives the same properties
    document.core_properties.created = document.core_properties.modified = fixed
    document.save(str(path))
    return _fixed_zip_times(path)


def _fixed_zip_times(path: Path) -> Path:
    """Rewrite a ZIP's entry times to one date, so the same content gives the same bytes."""
    with zipfile.ZipFile(path) as zf:
        entries = [(info, zf.read(info)) for info in zf.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries:
            info.date_time = (2025, 1, 1, 0, 0, 0)
            zf.writestr(info, data)
    return path


def write_pptx(path: Path, slides: Iterable[Page]) -> Path:
    """A title-and-content slide per item: the ``h*`` block is the title."""
    import pptx

    deck = pptx.Presentation()
    layout = deck.slide_layouts[1]
    for blocks in slides:
        slide = deck.slides.add_slide(layout)
        title = next((t for s, t in blocks if s != "p"), "")
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = "\n".join(t for s, t in blocks if s == "p")
    deck.save(str(path))
    return path


def write_xlsx(path: Path, sheets: dict[str, Sequence[Sequence[object]]]) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    book.save(str(path))
    return path


def html_page(pages: Page, *, nav: str = "Home | Products | About | Contact") -> str:
    body = "\n".join(f"<{s}>{t}</{s}>" for s, t in pages)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>t</title>"
            f"<script>var x = 1;</script></head><body><header><nav>{nav}</nav></header>"
            f"<main>{body}</main><footer>Copyright 2025</footer></body></html>")


def write_epub(path: Path, chapters: Iterable[Page]) -> Path:
    """A minimal valid EPUB 3: mimetype first and stored, container, package, chapters."""
    chapters = list(chapters)
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(len(chapters)))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr("META-INF/container.xml",
                    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                    'container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
                    'media-type="application/oebps-package+xml"/></rootfiles></container>')
        zf.writestr("OEBPS/content.opf",
                    f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                    f'<metadata/><manifest>{items}</manifest><spine>{spine}</spine></package>')
        for i, chapter in enumerate(chapters):
            body = "".join(f"<{s}>{t}</{s}>" for s, t in chapter)
            zf.writestr(f"OEBPS/c{i}.xhtml", f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>')
    return path


def corrupt(path: Path) -> Path:
    """Cut a file in half: a ZIP-based Office file loses its central directory."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def pdf_bytes(pages: Iterable[Page]) -> bytes:
    buffer = io.BytesIO()
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(buffer, pagesize=A4, invariant=1)
    for page in pages:
        y = 770
        for _, text in page:
            for line in _wrap(text, 90):
                pdf.drawString(72, y, line)
                y -= 15
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()
