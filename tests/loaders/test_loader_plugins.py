"""Loaders are a plugin kind: listed by ``ragkit plugins``, chosen by content
before extension, refused with a reason when mis-declared, and a loader that
crashes fails its own file only."""

from __future__ import annotations

import json
import types

import pytest

import ragkit.plugins
from ragkit.cli.main import main
from ragkit.loaders import Loaded, Loader, detect
from ragkit.loaders.base import TextBuilder
from ragkit.pipeline.load import load_documents
from ragkit.plugins import hookimpl
from ragkit.testing.registry import registry_with

FIRST_PARTY = {"pdf", "docx", "pptx", "xlsx", "csv", "html", "epub"}


class RtfLite(Loader):
    """A plugin's loader: ``{\\rtf`` files, text between the braces."""

    name = "rtf-lite"
    extensions = (".rtf",)
    media_types = ("application/rtf",)

    def sniff(self, data: bytes) -> bool:
        return data.startswith(b"{\\rtf")

    def load(self, data: bytes, name: str) -> Loaded:
        builder = TextBuilder()
        builder.add(data.decode().strip("{}").removeprefix("\\rtf1 "), page=1)
        return Loaded(builder.text(), builder.segments, "page", 1)


class Crashes(RtfLite):
    name = "crashes"
    extensions = (".boom",)

    def sniff(self, data: bytes) -> bool:
        raise ValueError("bug in sniff")  # skipped for every file: the extension still picks it

    def load(self, data: bytes, name: str) -> Loaded:
        raise RuntimeError("bug in the plugin")


class NoLoad(Loader):
    name = "no-load"
    extensions = (".x",)


class Unreachable(Loader):
    name = "unreachable"

    def load(self, data: bytes, name: str) -> Loaded:
        return Loaded("never")


class NotALoader:
    name = "not-a-loader"


def plugin(name: str, *classes: type) -> types.ModuleType:
    module = types.ModuleType(name)

    def register_loaders(register):
        for cls in classes:
            register(cls)

    module.register_loaders = hookimpl(register_loaders)
    return module


def test_first_party_loaders_are_listed_by_ragkit_plugins(capsys):
    assert main(["plugins", "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["kind"] == "loader"]
    assert {r["name"] for r in rows} >= FIRST_PARTY
    assert all(r["status"] == "ok" and r["distribution"] == "ragkit" for r in rows if r["name"] in FIRST_PARTY)


def test_mis_declared_loaders_are_refused_with_the_reason():
    registry = registry_with(plugin("bad_loaders", NoLoad, Unreachable, NotALoader), plugin("rtf", RtfLite))
    refused = {i.name: i.error for i in registry.refused("loader")}
    assert "defines no load(data, name)" in refused["no-load"]
    assert "no file would reach it" in refused["unreachable"]
    assert "not a subclass of ragkit.loaders.Loader" in refused["not-a-loader"]
    assert "rtf-lite" in registry.names("loader") and "no-load" not in registry.names("loader")
    # Content first: an RTF file named .txt goes to the plugin's loader.
    assert detect("notes.txt", b"{\\rtf1 hello}", registry).name == "rtf-lite"
    assert detect("notes.txt", b"hello", registry) is None


def test_a_crashing_loader_fails_its_file_and_the_run_goes_on(tmp_path, monkeypatch):
    registry = registry_with(plugin("crashing", Crashes, RtfLite))
    monkeypatch.setattr(ragkit.plugins, "get_registry", lambda **_: registry)
    (tmp_path / "a.boom").write_bytes(b"anything")
    (tmp_path / "b.rtf").write_bytes(b"{\\rtf1 The Okapi vault lantern is teal.}")
    (tmp_path / "c.md").write_text("# Fine\n")
    report = load_documents([tmp_path])
    items = {i.path.rsplit("/", 1)[-1]: i for i in report.items}
    assert items["a.boom"].outcome == "failed"
    assert "loader 'crashes' failed: RuntimeError: bug in the plugin" in items["a.boom"].message
    assert items["b.rtf"].outcome == "loaded" and items["c.md"].outcome == "loaded"
    rtf = next(d for d in report.documents if d.file_path.endswith("b.rtf"))
    assert rtf.content == "The Okapi vault lantern is teal." and rtf.segments[0].page == 1


def test_missing_library_names_the_extra(monkeypatch, tmp_path):
    from ragkit.loaders.pdf import PdfLoader

    monkeypatch.setattr(PdfLoader, "requires", ("pypdf_not_installed",))
    (tmp_path / "r.pdf").write_bytes(b"%PDF-1.4 ...")
    [item] = load_documents([tmp_path / "r.pdf"]).items
    assert item.outcome == "failed" and "pip install 'ragkit[documents]'" in item.message


def test_html_without_its_library_is_read_as_text_with_a_warning(monkeypatch, tmp_path):
    from ragkit.loaders.html import HtmlLoader

    monkeypatch.setattr(HtmlLoader, "requires", ("selectolax_not_installed",))
    (tmp_path / "p.html").write_text("<html><body><p>The Okapi vault lantern is teal.</p></body></html>")
    report = load_documents([tmp_path / "p.html"])
    [item], [doc] = report.items, report.documents
    assert item.outcome == "loaded_with_warnings" and "read as plain text" in item.message
    assert "pip install 'ragkit[documents]'" in item.message and doc.content.startswith("<html>")


def test_core_imports_without_the_documents_extra():
    """ragkit.loaders and the load stage import no loader library at import time."""
    import subprocess
    import sys

    code = ("import sys; import ragkit.loaders, ragkit.pipeline.load, ragkit.builtin; "
            "from ragkit.plugins import get_registry; get_registry(); "
            "bad = {'pypdf', 'docx', 'pptx', 'openpyxl', 'selectolax'} & set(sys.modules); "
            "assert not bad, bad")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0
