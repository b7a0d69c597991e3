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
            for number in range(count):
                section = sections.get(number, section)
                text = reader.pages[number].extract_text() or ""
                if text.strip():
                    builder.add(text, page=number + 1, section=section)
                else:
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


def _opened(reader) -> bool:
    """Many PDFs are encrypted with an empty user password (printing limits only)."""
    try:
        return bool(reader.decrypt(""))
    except Exception:  # a cipher pypdf cannot run without its crypto extra: still locked
        return False


def _pages(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:10]))
    return "p. " + shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
