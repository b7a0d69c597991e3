"""Headings of a PDF without bookmarks: a PDF made by
reportlab has headings set in a larger font and no outline. Each heading is
a paragraph of its own (not run into the sentence after it: "Repairs The
replacement pump...") and names the section of the text under it.

Troubleshooting: ``PdfLoader().load(data, name).segments`` shows the sections
found; the font sizes come from pypdf's ``extract_text(visitor_text=...)``.
"""

from __future__ import annotations

import io

from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

from ragkit.loaders.pdf import PdfLoader
from ragkit.offline.text import split_sentences


def report_pdf() -> bytes:
    styles = getSampleStyleSheet()
    out = io.BytesIO()
    SimpleDocTemplate(out).build([
        Paragraph("Inspection", styles["Heading1"]),
        Paragraph("The inspection of pump station 4 found a worn seal on the main pump. "
                  "The crew logged it on 3 March.", styles["BodyText"]),
        Paragraph("Repairs", styles["Heading2"]),
        Paragraph("The replacement pump was installed by Lotus Works on 12 March.", styles["BodyText"]),
        PageBreak(),
        Paragraph("It passed the pressure test on 14 March.", styles["BodyText"]),
        Paragraph("Costs", styles["Heading1"]),
        Paragraph("The repair cost 4,200 euros, paid by the port authority.", styles["BodyText"]),
    ])
    return out.getvalue()


def test_headings_are_paragraphs_and_sections():
    loaded = PdfLoader().load(report_pdf(), "report.pdf")
    sentences = [s.text for s in split_sentences(loaded.text)]
    assert "Repairs" in sentences and "The replacement pump was installed by Lotus Works on 12 March." in sentences
    assert not any(s.startswith(("Repairs The", "Inspection The", "Costs The")) for s in sentences), sentences
    where = {(seg.page, seg.section) for seg in loaded.segments}
    assert where == {(1, "Inspection"), (1, "Inspection > Repairs"), (2, "Inspection > Repairs"), (2, "Costs")}
    text_of = {seg.section: loaded.text[seg.start:seg.end] for seg in loaded.segments if seg.page == 1}
    assert "Lotus Works" in text_of["Inspection > Repairs"] and "Lotus Works" not in text_of["Inspection"]
