"""HTML (selectolax) and EPUB (zipfile + the same HTML reader).

An EPUB's entries are read through ``SafeZip`` (the ``[loaders]`` bounds, no
XML entity declarations). selectolax is an HTML parser: it expands no DTD
entity and fetches nothing, so the package document and chapters are safe to
parse once read.

Main content: the page's ``<main>`` or ``<article>`` if it has one, else the
body without navigation, header, footer, aside, forms and scripts. Headings
give each paragraph its section. A page with nothing left (all navigation) is
not indexed, with the reason.
"""

from __future__ import annotations

import posixpath
import re
import zipfile

from ragkit.loaders.archive import SafeZip
from ragkit.loaders.base import Loaded, Loader, LoaderError, TextBuilder

_BOILERPLATE = "nav, header, footer, aside, form, script, style, noscript, template, svg, iframe, button"
_BLOCKS = "h1, h2, h3, h4, h5, h6, p, li, pre, blockquote, td, th, dt, dd, figcaption, caption"
_HEADING = re.compile(r"h([1-6])")

ALL_NAVIGATION = (
    "no main content: the page is only navigation, header, footer or scripts; if its text is "
    "rendered by JavaScript, save the rendered page (or export it as PDF) and index that"
)


def _decode(data: bytes) -> str:
    head = data[:2048].decode("ascii", "replace").lower()
    match = re.search(r'charset=["\']?([a-z0-9_-]+)', head)
    for encoding in ([match.group(1)] if match else []) + ["utf-8"]:
        try:
            return data.decode(encoding, errors="replace")
        except LookupError:
            continue
    return data.decode("utf-8", errors="replace")


def html_text(data: bytes, builder: TextBuilder, page: int | None = None) -> None:
    """Adds the main content of one HTML page to ``builder``."""
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    tree = HTMLParser(_decode(data))
    root = tree.css_first("main") or tree.css_first("article") or tree.body or tree.root
    if root is None:
        return
    for node in root.css(_BOILERPLATE):
        node.decompose()
    headings: list[str] = []
    blocks = root.css(_BLOCKS)
    if not blocks:
        builder.add(root.text(separator=" "), page=page)
        return
    for node in blocks:
        # A block inside another block (a <p> in an <li>) is read with its parent.
        if node.parent is not None and any(a.tag in _BLOCK_TAGS for a in _ancestors(node)):
            continue
        text = " ".join(node.text(separator=" ").split())
        level = _HEADING.fullmatch(node.tag)
        if level:
            headings = [*headings[: int(level.group(1)) - 1], text]
        builder.add(text, page=page, section=" > ".join(h for h in headings if h) or None)


_BLOCK_TAGS = frozenset(t.strip() for t in _BLOCKS.split(","))


def _ancestors(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


class HtmlLoader(Loader):
    name = "html"
    description = "web pages: main content without navigation, sections from headings (selectolax)"
    extensions = (".html", ".htm", ".xhtml")
    media_types = ("text/html", "application/xhtml+xml")
    requires = ("selectolax",)

    def load(self, data: bytes, name: str) -> Loaded:
        builder = TextBuilder()
        html_text(data, builder)
        if builder.empty:
            raise LoaderError(ALL_NAVIGATION)
        return Loaded(builder.text(), builder.segments, "page", None)


class EpubLoader(Loader):
    name = "epub"
    description = "EPUB books: chapters in reading order, sections from headings (zipfile + selectolax)"
    extensions = (".epub",)
    media_types = ("application/epub+zip",)
    requires = ("selectolax",)

    def sniff(self, data: bytes) -> bool:
        # The first entry is an uncompressed "mimetype" file naming the type.
        return data.startswith(b"PK\x03\x04") and b"application/epub+zip" in data[30:100]

    def load(self, data: bytes, name: str) -> Loaded:
        try:
            with SafeZip(data, self.limits) as book:
                chapters = [book.read(path) for path in _spine(book)]
        except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
            raise LoaderError(f"corrupt EPUB ({type(exc).__name__}: {str(exc)[:120]}): export or download it again") from None
        builder = TextBuilder()
        for number, chapter in enumerate(chapters, start=1):
            html_text(chapter, builder, page=number)
        if builder.empty:
            raise LoaderError("the EPUB has no text in its chapters")
        return Loaded(builder.text(), builder.segments, "page", len(chapters))


def _spine(book: SafeZip) -> list[str]:
    """Chapter paths in reading order, from the package document the container names."""
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    container = HTMLParser(book.read("META-INF/container.xml").decode("utf-8", "replace"))
    rootfile = container.css_first("rootfile")
    opf_path = rootfile.attributes.get("full-path") if rootfile else None
    if not opf_path:
        raise KeyError("META-INF/container.xml names no package document")
    opf = HTMLParser(book.read(opf_path).decode("utf-8", "replace"))
    base = posixpath.dirname(opf_path)
    items = {i.attributes.get("id"): i.attributes.get("href") for i in opf.css("item")}
    order = [items.get(r.attributes.get("idref")) for r in opf.css("itemref")]
    return [posixpath.join(base, href) for href in order if href]
