"""PDF: the text layer, page by page (pypdf).

Pages are read one at a time and only their text is kept, so memory grows with
the text, not with the parsed pages (benchmarks/large_pdf.py measures it).
No OCR: a page without a text layer is reported, and a file with none fails
with the fix (an OCR loader plugin, or OCR the file first).

Decompression bombs: pypdf (6.8 and later, the ``documents`` extra's floor)
stops every stream filter that can inflate far (Flate, LZW, RunLength) at
75 MB of output and raises ``LimitReachedError``; the file then fails alone
naming that limit. Time is not bounded here: the server loads files in a child
process with a timeout (``ragkit.pipeline.load_isolated``)."""

from __future__ import annotations

import io

from ragkit.loaders.base import Loaded, Loader, LoaderError, TextBuilder

NO_TEXT_LAYER = (
    "no text layer: the PDF is scanned images; configure an OCR loader (a plugin registering a "
    "'pdf' loader with OCR) or OCR the file first (e.g. ocrmypdf in.pdf out.pdf)"
)


class PdfLoader(Loader):
    name = "pdf"
    description = "PDF text layer, page by page (pypdf); no OCR"
    extensions = (".pdf",)
    media_types = ("application/pdf",)
    requires = ("pypdf",)

    def sniff(self, data: bytes) -> bool:
        # The header may follow a little junk; readers look in the first 1024 bytes.
        return b"%PDF-" in data[:1024]

    def load(self, data: bytes, name: str) -> Loaded:
        import pypdf
        from pypdf.errors import LimitReachedError, PdfReadError

        try:
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not _opened(reader):
                raise LoaderError(
                    "encrypted PDF: it needs a password to open; decrypt it "
                    "(e.g. qpdf --decrypt --password=... in.pdf out.pdf) and index the copy"
                )
            builder, empty = TextBuilder(), []
            count = len(reader.pages)
            sections = _outline(reader)
            section = None
            headings = _Headings()
            for number in range(count):
                if sections:
                    section = sections.get(number, section)
                    text = reader.pages[number].extract_text() or ""
                    pieces = [(text, section)]
                else:  # no bookmarks: headings by font size
                    pieces = headings.page(reader.pages[number])
                for text, piece_section in pieces:
                    builder.add(text, page=number + 1, section=piece_section)
                if not any(text.strip() for text, _ in pieces):
                    empty.append(number + 1)
        except LoaderError:
            raise
        except LimitReachedError as exc:
            raise LoaderError(
                f"a stream in the PDF inflates past pypdf's limit (75 MB by default; {str(exc)[:120]}): a decompression "
                "bomb, or a PDF too unusual to index; the file is not read. The limit is pypdf's own "
                "(pypdf.Configuration, or pypdf.filters in pypdf 6): raise it in a loader plugin if the file is genuine"
            ) from None
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            raise LoaderError(
                f"not a readable PDF ({type(exc).__name__}: {str(exc)[:120]}); "
                "the file is damaged or truncated: export or download it again"
            ) from None
        if builder.empty:
            raise LoaderError(NO_TEXT_LAYER if count else "the PDF has no pages")
        warnings = []
        if empty:
            warnings.append(f"{len(empty)} of {count} pages have no text layer ({_pages(empty)}): "
                            "their content is not indexed; configure an OCR loader for scanned pages")
        return Loaded(builder.text(), builder.segments, "page", count, warnings)


def _outline(reader) -> dict[int, str]:
    """Page index -> the heading path (from the PDF's bookmarks) of the last
    heading on that page. PDFs without bookmarks have no sections."""
    found: dict[int, str] = {}

    def walk(items: list, path: list[str]) -> None:
        last = None
        for item in items:
            if isinstance(item, list):
                if last is not None:
                    walk(item, [*path, last])
                continue
            title = " ".join(str(getattr(item, "title", "") or "").split())
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # a bookmark to nowhere: keep the others
                page = None
            if title and page is not None and page >= 0:
                found[page] = " > ".join([*path, title])
            last = title or last

    try:
        walk(reader.outline, [])
    except Exception:  # a damaged outline costs the sections, not the text
        return {}
    return found


HEADING_RATIO = 1.15
"""A line set this much larger than the page's body text is a heading..."""
HEADING_MAX_CHARS = 120
"""...if it is this short and does not end a sentence."""


class _Headings:
    """Headings of a PDF without bookmarks, found by font size (what a PDF made
    by reportlab, or printed from a word processor, has): each becomes a
    paragraph of its own, so it does not run into the sentence after it, and
    names the section of the text under it (``Inspection > Repairs``). A
    larger heading closes the smaller ones before it. Pages without a larger
    line keep pypdf's text as is."""

    def __init__(self) -> None:
        self.open: list[tuple[float, str]] = []  # (size, title), outermost first

    @property
    def section(self) -> str | None:
        return " > ".join(title for _, title in self.open) or None

    def page(self, page) -> list[tuple[str, str | None]]:
        lines: list[tuple[str, float]] = []
        current: list[str] = []
        sizes: list[float] = []

        def visit(text: str, cm, tm, font, size: float) -> None:
            scale = abs(tm[3] * cm[3]) if tm and cm and tm[3] and cm[3] else 1.0
            for i, part in enumerate(text.split("\n")):
                if i:
                    lines.append(("".join(current), max(sizes, default=0.0)))
                    current.clear()
                    sizes.clear()
                current.append(part)
                if part.strip():
                    sizes.append(size * scale)

        text = page.extract_text(visitor_text=visit) or ""
        lines.append(("".join(current), max(sizes, default=0.0)))
        weight: dict[float, int] = {}
        for line, size in lines:
            weight[size] = weight.get(size, 0) + len(line.strip())
        body = max(weight, key=weight.__getitem__, default=0.0)
        if not any(self._is_heading(line, size, body) for line, size in lines):
            return [(text, self.section)]
        pieces: list[tuple[str, str | None]] = []
        under: list[str] = []
        for line, size in lines:
            if not self._is_heading(line, size, body):
                under.append(line)
                continue
            pieces.append(("\n".join(under), self.section))
            under = []
            title = " ".join(line.split())
            self.open = [(s, t) for s, t in self.open if s > size] + [(size, title)]
            pieces.append((title, self.section))
        pieces.append(("\n".join(under), self.section))
        return [(t, sec) for t, sec in pieces if t.strip()]

    @staticmethod
    def _is_heading(line: str, size: float, body: float) -> bool:
        words = line.strip()
        return (bool(body) and size >= body * HEADING_RATIO and 0 < len(words) <= HEADING_MAX_CHARS
                and not words.endswith((".", ",", ";", ":")))


def _opened(reader) -> bool:
    """Many PDFs are encrypted with an empty user password (printing limits only)."""
    try:
        return bool(reader.decrypt(""))
    except Exception:  # a cipher pypdf cannot run without its crypto extra: still locked
        return False


def _pages(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:10]))
    return "p. " + shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
