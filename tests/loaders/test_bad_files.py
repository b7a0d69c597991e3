"""Files a loader cannot read: each fails (or warns) alone, with the cause and
the fix, and the other files of the run are still loaded."""

from __future__ import annotations

import pytest

from ragkit.loaders import LoaderError, load_bytes, load_document, supported_types
from ragkit.pipeline.load import load_documents
from ragkit.testing.documents import (
    corrupt, html_page, write_docx, write_pdf, write_pptx, write_scanned_pdf, write_xlsx,
)

TEXT = [[("h1", "Title"), ("p", "A page with a text layer about the Okapi vault.")]]


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    write_pdf(folder / "encrypted.pdf", TEXT, encrypt="secret")
    write_scanned_pdf(folder / "scanned.pdf")
    corrupt(write_docx(folder / "broken.docx", TEXT))
    corrupt(write_pptx(folder / "broken.pptx", TEXT))
    corrupt(write_xlsx(folder / "broken.xlsx", {"S": [["a", "b"], [1, 2]]}))
    (folder / "nav.html").write_text(
        "<html><body><nav><a href='/'>Home</a> <a href='/a'>About</a></nav>"
        "<header>Site</header><footer>(c) 2025</footer><script>render()</script></body></html>")
    (folder / "fake.pdf").write_text("this is not a PDF at all")
    # What Word writes for a password-protected .docx: an OLE compound file, not a ZIP.
    (folder / "locked.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    (folder / "good.md").write_text("# Good\n\nThis file is fine.\n")
    return folder


def messages(report) -> dict[str, tuple[str, str]]:
    return {item.path.rsplit("/", 1)[-1]: (item.outcome, item.message) for item in report.items}


def test_each_bad_file_names_cause_and_fix_and_the_run_goes_on(folder):
    report = load_documents([folder])
    got = messages(report)
    assert got["good.md"][0] == "loaded" and len(report.documents) == 1
    outcome, message = got["encrypted.pdf"]
    assert outcome == "failed" and "encrypted PDF" in message and "qpdf --decrypt" in message
    outcome, message = got["scanned.pdf"]
    assert outcome == "failed" and "no text layer" in message and "configure an OCR loader" in message
    for name, kind in (("broken.docx", "Word"), ("broken.pptx", "PowerPoint"), ("broken.xlsx", "Excel")):
        outcome, message = got[name]
        assert outcome == "failed" and f"corrupt {kind} file" in message and "re-save it" in message, (name, message)
    outcome, message = got["nav.html"]
    assert outcome == "failed" and "no main content" in message and "navigation" in message
    outcome, message = got["locked.docx"]
    assert outcome == "failed" and "password-protected or old-format" in message and "remove the password" in message
    outcome, message = got["fake.pdf"]
    assert outcome == "failed" and "not a readable PDF" in message


def test_a_pdf_with_some_scanned_pages_loads_with_a_warning(tmp_path):
    from pypdf import PdfReader, PdfWriter

    text, scan = write_pdf(tmp_path / "t.pdf", TEXT * 2), write_scanned_pdf(tmp_path / "s.pdf", 1)
    writer = PdfWriter()
    for page in [*PdfReader(text).pages, *PdfReader(scan).pages]:
        writer.add_page(page)
    with open(tmp_path / "mixed.pdf", "wb") as fh:
        writer.write(fh)
    report = load_documents([tmp_path / "mixed.pdf"])
    [item] = report.items
    assert item.outcome == "loaded_with_warnings" and item.pages == 3
    assert "1 of 3 pages have no text layer (p. 3)" in item.message and "OCR loader" in item.message


def test_load_bytes_for_uploads(tmp_path):
    data = write_pdf(tmp_path / "r.pdf", TEXT).read_bytes()
    loaded = load_bytes(data, "upload.bin.pdf")
    assert "Okapi vault" in loaded.text and loaded.pages == 1 and loaded.loader == "pdf"
    doc = load_document(data, "uploads/r.pdf", team="a")
    assert doc.file_path == "uploads/r.pdf" and doc.segments[0].page == 1
    assert doc.metadata == {"source": "file", "loader": "pdf", "pages": 1, "team": "a"}
    assert load_bytes(b"plain words", "a.md").text == "plain words"
    with pytest.raises(LoaderError, match=r"unsupported file type '\.exe'"):
        load_bytes(b"MZ...", "tool.exe")
    types = supported_types()
    assert {".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".html", ".epub", ".md", ".txt",
            "application/pdf", "text/html", "text/markdown"} <= set(types)
