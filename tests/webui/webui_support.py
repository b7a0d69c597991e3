"""Helpers of the browser tests: keys, test documents, a page that collects
console errors, sign-in and screenshots."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.server.keys import KeyStore

CHROMIUM = os.environ.get("RAGKIT_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "webui-screenshots"
"""Screenshots of each page at each width (git ignores build/)."""
WIDTHS = {"laptop": (1280, 860), "phone": (390, 844)}
CANARY = "Zephyr Quartzmoor"
"""Only in the hidden document: the restricted key must never see it."""

PDF_PAGES = [
    "Falcon Project overview. This report describes the Falcon Project in detail.",
    "Alice Smith leads the Falcon Project at Acme Corporation. The Falcon Project builds a solar drone for farmers.",
]
DOCX_TEXT = ["Supplier report", "Beta Logistics supplies batteries to Acme Corporation. Beta Logistics delayed its battery delivery in March."]
HIDDEN_TEXT = f"{CANARY} directs the secret Orchid Programme at Acme Corporation. {CANARY} met Alice Smith in Geneva."


@dataclass
class Keys:
    writer: str
    """alpha, user wendy (group team), write scope"""
    admin: str
    """every workspace, user root, admin scope"""
    restricted: str
    """alpha, user rita, no group, read scope: cannot read the hidden document"""


def make_keys(working_dir: Path) -> Keys:
    (working_dir / "alpha").mkdir(parents=True, exist_ok=True)
    store = KeyStore(working_dir / "server_keys.sqlite")
    return Keys(
        writer=store.create(["alpha"], "wendy", ["team"], "write")[1],
        admin=store.create(["*"], "root", ["ops"], "admin")[1],
        restricted=store.create(["alpha"], "rita", [], "read")[1],
    )


def pdf_bytes() -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    for text in PDF_PAGES:
        for n, sentence in enumerate(text.split(". ")):  # a line each: none runs off the page
            c.drawString(72, 760 - 20 * n, sentence.rstrip(".") + ".")
        c.showPage()
    c.save()
    return buf.getvalue()


def docx_bytes() -> bytes:
    import docx

    d = docx.Document()
    d.add_heading(DOCX_TEXT[0], level=1)
    d.add_paragraph(DOCX_TEXT[1])
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


@dataclass
class Watched:
    """A page and the console errors and uncaught exceptions it had."""

    page: object
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert not self.errors, f"browser console errors: {self.errors}"


def open_page(browser, url: str, width: str = "laptop") -> Watched:
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h})
    page = context.new_page()
    watched = Watched(page)
    page.on("console", lambda m: m.type == "error" and watched.errors.append(m.text))
    page.on("pageerror", lambda e: watched.errors.append(f"uncaught: {e}"))
    page.on("dialog", lambda d: d.accept())
    page.set_default_timeout(30_000)
    page.goto(url)
    return watched


def sign_in(page, key: str) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("header:not([hidden])")


def shot(page, name: str, width: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    return path

