"""Hostile files against the loaders' bounds (``ragkit.loaders.archive``):
zip bombs, a zip whose directory lies about sizes, too many entries, XML
entity bombs and an external-entity read, a PDF bomb. Each is a real file
(``ragkit.testing.bombs``); each fails alone naming the bound, a genuine file
of the same type beside it still loads, and reading the bomb costs this
process far less memory than the bomb inflates to (peak RSS, reset before).

Troubleshooting: a bomb that *loads* means a bound is not checked; a memory
assertion that fails means something inflated the bomb whole (look for
``ZipFile.read`` or a library opening the zip before ``SafeZip.verify``)."""

from __future__ import annotations

import io
import shutil
import zipfile

import pytest

from ragkit.loaders import LoaderError, load_bytes
from ragkit.loaders.limits import LoaderLimits
from ragkit.pipeline.load import load_documents
from ragkit.testing.bombs import (
    BILLION_LAUGHS, MAIN_PART, entity_file, lie_about_size, many_entries, normal_file, pdf_bomb, peak_growth,
    replace_part, xxe_doctype, zip_bomb,
)
from ragkit.testing.documents import write_pdf

MiB = 1 << 20
FORMATS = (".epub", ".docx", ".pptx", ".xlsx")
BOMB = 300 * MiB
"""What each zip bomb inflates to: over the 128 MiB entry limit, 2-5 times
what a loader used to take in memory reading it whole."""
CANARY = "CANARY-7f3a-the-local-file-an-XXE-would-read"
FAILS_WITH = {
    "bomb": "over the loader's limit of 128 MiB ([loaders] max_entry_bytes)",
    "lie": "inflates past the 4 KiB its zip directory states",
    "laughs": "declares XML entities",
    "xxe": "declares XML entities",
    "many": "over the loader's limit of 10,000 files ([loaders] max_entries)",
}
MAX_GROWTH = 64 * MiB
"""Peak memory a bomb may cost: the loaders' imports and a MiB-sized inflate buffer."""


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("bombs")
    canary = folder / "canary.txt"
    canary.write_text(CANARY)
    files = {}
    for ext in FORMATS:
        files["bomb" + ext] = zip_bomb(folder / f"bomb{ext}", BOMB)
        files["lie" + ext] = lie_about_size(shutil.copy(files["bomb" + ext], folder / f"lie{ext}"))
        files["laughs" + ext] = entity_file(folder / f"laughs{ext}", BILLION_LAUGHS, b"&lol9;")
        files["xxe" + ext] = entity_file(folder / f"xxe{ext}", xxe_doctype(canary), b"&xxe;")
    files["many.docx"] = many_entries(folder / "many.docx")
    return files


def outcomes(report) -> dict:
    return {item.path.rsplit("/", 1)[-1]: item for item in report.items}


@pytest.mark.parametrize("ext", FORMATS)
@pytest.mark.parametrize("attack", ["bomb", "lie", "laughs", "xxe"])
def test_each_attack_fails_alone_naming_the_bound(made, tmp_path, attack, ext):
    """A bomb of each kind and format beside a genuine file of its type: the
    bomb fails naming what stopped it, the genuine file loads, memory stays low."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(made[attack + ext], folder / f"attack{ext}")
    normal_file(folder / f"fine{ext}", f"The {ext} lantern of the Okapi vault is teal.")
    report, grown = peak_growth(lambda: load_documents([folder]))
    items = outcomes(report)
    assert items[f"attack{ext}"].outcome == "failed", items
    assert FAILS_WITH[attack] in items[f"attack{ext}"].message
    assert items[f"fine{ext}"].outcome == "loaded", items[f"fine{ext}"]
    assert [d.file_path.rsplit("/", 1)[-1] for d in report.documents] == [f"fine{ext}"]
    assert CANARY not in repr(report)
    assert grown < MAX_GROWTH, f"reading a {BOMB >> 20} MiB bomb grew the peak by {grown >> 20} MiB"


def test_a_zip_of_too_many_entries_is_refused_before_its_directory_is_read(made, tmp_path):
    """20,000 empty entries: zipfile would spend ~10 MiB reading their directory."""
    report, grown = peak_growth(lambda: load_documents([made["many.docx"]]))
    [item] = report.items
    assert item.outcome == "failed" and FAILS_WITH["many"] in item.message
    assert "raise max_entries (RAGKIT_LOADERS__MAX_ENTRIES)" in item.message
    assert grown < MAX_GROWTH


def test_an_entity_declaration_in_utf16_is_refused_too(tmp_path):
    """OOXML and EPUB parts may be UTF-16; the declaration is looked for in it as well."""
    path = normal_file(tmp_path / "wide.docx", "PLACEHOLDER")
    with zipfile.ZipFile(path) as zf:
        xml = zf.read(MAIN_PART[".docx"]).decode()
    end = xml.index("?>") + 2
    xml = xml[:end].replace("UTF-8", "UTF-16") + BILLION_LAUGHS.decode() + xml[end:].replace("PLACEHOLDER", "&lol9;")
    replace_part(path, MAIN_PART[".docx"], iter([xml.encode("utf-16")]))
    with pytest.raises(LoaderError, match="declares XML entities"):
        load_bytes(path.read_bytes(), "wide.docx")


@pytest.mark.parametrize("setting, value, named", [
    ("max_entries", 3, "([loaders] max_entries)"),
    ("max_entry_bytes", 100, "([loaders] max_entry_bytes)"),
    ("max_decompressed_bytes", 500, "([loaders] max_decompressed_bytes)"),
    ("max_compression_ratio", 1.01, "([loaders] max_compression_ratio)"),
])
@pytest.mark.parametrize("ext", FORMATS)
def test_each_bound_is_named_and_a_genuine_file_passes_with_the_default(tmp_path, ext, setting, value, named):
    """Every bound, set below a genuine file, fails it with the setting to raise;
    the defaults read it."""
    data = normal_file(tmp_path / f"fine{ext}").read_bytes()
    limits = LoaderLimits(**{setting: value, "ratio_grace_bytes": 0})
    with pytest.raises(LoaderError) as caught:
        load_bytes(data, f"fine{ext}", limits=limits)
    assert named in str(caught.value) and f"RAGKIT_LOADERS__{setting.upper()}" in str(caught.value)
    assert "Okapi vault" in load_bytes(data, f"fine{ext}").text


def test_the_libraries_own_parsers_expand_no_entity(tmp_path):
    """The second line, for an XML part not named like one: python-docx and
    python-pptx parse with resolve_entities=False (libxml2 also caps
    amplification), openpyxl's sheet parser is defusedxml's."""
    from defusedxml import EntitiesForbidden
    from docx.oxml.parser import parse_xml as docx_parse
    from lxml import etree
    from openpyxl.xml.functions import iterparse
    from pptx.oxml import parse_xml as pptx_parse

    canary = tmp_path / "canary.txt"
    canary.write_text(CANARY)
    laughs = BILLION_LAUGHS + b"<r>&lol9;</r>"
    xxe = xxe_doctype(canary) + b"<r>&xxe;</r>"

    def parse_all() -> None:
        for parse in (docx_parse, pptx_parse):
            with pytest.raises(etree.XMLSyntaxError, match="amplification"):
                parse(laughs)
            assert CANARY not in etree.tostring(parse(xxe)).decode()
        for bomb in (laughs, xxe):
            with pytest.raises(EntitiesForbidden):
                list(iterparse(io.BytesIO(bomb)))

    _, grown = peak_growth(parse_all)
    assert grown < MAX_GROWTH


def test_a_pdf_bomb_fails_naming_pypdfs_limit(tmp_path):
    """1 GiB of content stream in a 1 MiB PDF: pypdf stops inflating at 75 MB."""
    folder = tmp_path / "in"
    folder.mkdir()
    bomb = pdf_bomb(folder / "bomb.pdf", 1 << 30)
    write_pdf(folder / "fine.pdf", [[("p", "The PDF lantern of the Okapi vault is teal.")]])
    report, grown = peak_growth(lambda: load_documents([folder]))
    items = outcomes(report)
    assert items["bomb.pdf"].outcome == "failed" and "pypdf's limit" in items["bomb.pdf"].message
    assert items["fine.pdf"].outcome == "loaded"
    assert bomb.stat().st_size < 2 * MiB and grown < 256 * MiB, (bomb.stat().st_size, grown >> 20)
