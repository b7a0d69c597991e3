"""Real files of every supported type, written by each format's own library,
indexed (offline LLM, hash embedder) and queried: the answer's reference cites
the page (slide, sheet) the answer is on, and the cited passage holds it."""

from __future__ import annotations

import pytest

from ragkit.offline import OfflineLLM
from ragkit.rag import RAG
from ragkit.schema import QueryParam
from ragkit.sections.index import IndexConfig
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder
from ragkit.testing.documents import (
    html_page, write_docx, write_epub, write_pdf, write_pptx, write_xlsx,
)

FILLER = [
    ("p", "The quarterly figures for the northern depot were reviewed by the finance team on Monday."),
    ("p", "Shipping volumes stayed close to the forecast and no further action was requested."),
]
ANSWER = "The zebra lantern of the Okapi vault is painted teal."
QUESTION = "What colour is the zebra lantern of the Okapi vault painted?"


def pages(answer_on: int, n: int = 3, headings: bool = True) -> list[list[tuple[str, str]]]:
    out = []
    for i in range(1, n + 1):
        page = [("h1", f"Chapter {i} overview")] if headings else []
        page += [("p", f"Section {i} covers depot {i}. {FILLER[i % 2][1]}")]
        if i == answer_on:
            page.append(("p", ANSWER))
        out.append(page)
    return out


def make_files(folder):
    folder.mkdir()
    write_pdf(folder / "report.pdf", pages(2))
    write_docx(folder / "memo.docx", pages(3))
    write_pptx(folder / "deck.pptx", pages(2))
    write_xlsx(folder / "book.xlsx", {"Depots": [["Depot", "Region"], *([f"Depot {i}", "Lapland"] for i in range(12))],
                                      "Vault": [["Item", "Fact"], ["zebra lantern", ANSWER]]})
    (folder / "table.csv").write_text("item,fact\nzebra lantern,The Okapi vault lantern is teal\n")
    (folder / "page.html").write_text(html_page([("h1", "Vault guide"), ("h2", "Lanterns"), ("p", ANSWER)]))
    write_epub(folder / "book.epub", [pages(1, 1)[0], [("h1", "Lanterns"), ("p", ANSWER)]])
    return folder


# (file, where the answer is: unit and number, section or None)
EXPECTED = {
    "report.pdf": ("p. 2", "Chapter 2 overview"),
    "memo.docx": ("p. 3", "Chapter 3 overview"),
    "deck.pptx": ("slide 2", "Chapter 2 overview"),
    "book.xlsx": ("sheet 2", "Vault"),
    "page.html": ("", "Vault guide > Lanterns"),
    "book.epub": ("p. 2", "Lanterns"),
}


def make_rag(tmp_path) -> RAG:
    return RAG(Settings(working_dir=tmp_path / "data"), llm=OfflineLLM(),
               embedder=HashEmbedder({"dimension": 512}),
               index=IndexConfig(chunk_size=48, chunk_overlap=8))


async def test_each_type_is_cited_down_to_its_page_and_passage(tmp_path):
    folder = make_files(tmp_path / "docs")
    async with make_rag(tmp_path) as rag:
        loaded, report = await rag.ainsert(paths=[folder])
        assert not report.failed
        outcomes = {item.path.rsplit("/", 1)[-1]: item for item in loaded.items}
        assert all(item.outcome == "loaded" for item in outcomes.values()), loaded.items
        assert outcomes["report.pdf"].pages == 3 and outcomes["deck.pptx"].pages == 3
        for name, (pages_label, section) in EXPECTED.items():
            doc = next(d for d in loaded.documents if d.file_path.endswith(name))
            result = await rag.aquery(QUESTION, param=QueryParam(mode="naive", chunk_top_k=1, doc_ids=[doc.id]))
            [chunk], [ref] = result.chunks, result.references
            assert ANSWER in chunk["content"], (name, chunk)
            [location] = ref.locations
            assert location.label().startswith(pages_label) and section in (location.section or ""), (name, location)
            assert ref.citation.startswith(f"{doc.file_path} {pages_label}".strip()), ref.citation
            # The span points at the passage in the document's text.
            assert doc.content[location.char_start:location.char_end] == chunk["content"]
        csv_doc = next(d for d in loaded.documents if d.file_path.endswith("table.csv"))
        assert "item: zebra lantern; fact: The Okapi vault lantern is teal" in csv_doc.content


def test_chunks_end_at_page_boundaries(tmp_path):
    from ragkit.pipeline.chunk import TokenChunker
    from ragkit.pipeline.load import load_documents
    from ragkit.tokenizer import TiktokenTokenizer

    path = write_pdf(tmp_path / "r.pdf", pages(2, n=6))
    [doc] = load_documents([path]).documents
    chunks = TokenChunker(TiktokenTokenizer(), 60, 10).chunk(doc)
    starts = {s.start for s in doc.segments} | {len(doc.content)}
    assert len(chunks) >= 3
    for chunk in chunks:  # every page fits in a chunk: none is cut inside a page
        loc = chunk.location
        assert loc.char_start in starts and loc.char_end in starts
        assert doc.content[loc.char_start:loc.char_end] == chunk.content


def test_sniffing_reads_a_pdf_named_txt_as_pdf(tmp_path):
    from ragkit.pipeline.load import load_documents

    path = tmp_path / "notes.txt"
    path.write_bytes(write_pdf(tmp_path / "x.pdf", pages(1, n=1)).read_bytes())
    report = load_documents([path])
    [doc] = report.documents
    assert doc.metadata["loader"] == "pdf" and ANSWER in doc.content and "%PDF" not in doc.content
    assert doc.segments[0].page == 1


def test_cli_query_json_and_printed_references_carry_pages(tmp_path, monkeypatch, capsys):
    import json

    from ragkit.cli.main import main

    folder = tmp_path / "docs"
    folder.mkdir()
    write_pdf(folder / "report.pdf", pages(2))
    monkeypatch.chdir(tmp_path)
    for name in [n for n in list(__import__("os").environ) if n.startswith("RAGKIT_")]:
        monkeypatch.delenv(name)
    (tmp_path / "ragkit.toml").write_text('[embedder]\nname = "hash"\n[embedder.options]\ndimension = 256\n'
                                          '[index]\nchunk_size = 48\nchunk_overlap = 8\n')
    assert main(["index", "docs", "--dry-run"]) == 0
    assert "docs/report.pdf: 3 pages, " in capsys.readouterr().out
    assert main(["index", "docs"]) == 0
    capsys.readouterr()
    assert main(["query", QUESTION, "--mode", "naive", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    [source], [ref], best = result["sources"], result["references"], result["chunks"][0]
    assert ANSWER in best["content"] and best["location"]["page_start"] == best["location"]["page_end"] == 2
    # One source per document: its citation covers the pages of every chunk in the context, in order.
    assert source["citation"] == ("docs/report.pdf p. 1\u20133, \u00a7Chapter 1 overview; \u00a7Chapter 2 overview; "
                                  "\u00a7Chapter 3 overview")
    assert {loc["page_start"] for loc in source["locations"]} == {1, 2, 3}
    # The offline answer quotes the page-2 sentence: the reference cites that page.
    assert ref["citation"] == "docs/report.pdf p. 2, \u00a7Chapter 2 overview" and best["id"] in ref["chunk_ids"]
    assert main(["query", QUESTION, "--mode", "naive"]) == 0
    assert f"[1] {ref['citation']}" in capsys.readouterr().out


def test_example_corpus_pdf_and_docx_load_with_their_pages_and_sections():
    """The committed files of scripts/make-example-docs, as `make demo` indexes them."""
    from pathlib import Path

    from ragkit.pipeline.load import load_documents

    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus" / "en"
    report = load_documents([corpus / "yingchuan-incident-report.pdf", corpus / "haijia-procurement-memo.docx"])
    assert [i.outcome for i in report.items] == ["loaded", "loaded"]
    pdf, docx = report.documents
    assert [i.pages for i in report.items] == [3, 2]

    def where(doc, text):
        start = doc.content.index(text)
        return next((s.page, s.section) for s in doc.segments if s.start <= start < s.end)

    assert where(pdf, "thermocouple") == (2, "Yingchuan Electronics incident report IR-2025-014 > 2. Root cause")
    assert where(pdf, "17 March 2025")[0] == 3
    assert where(docx, "fifty spare CB-7") == (1, "Project Haijia procurement memo > Spare CB-7 boards")
    assert where(docx, "Dongfang Circuits") == (2, "Project Haijia procurement memo > Second source")
    assert "Item: CB-7 spare boards; Quantity: 50; Supplier: Yingchuan Electronics" in docx.content


async def test_pages_are_stored_with_the_document_so_chunking_again_gives_the_same_chunks(tmp_path):
    """A resumed or deleted document is chunked again from the stored record: its
    segments are stored with it, or the ids would not match the ones indexed."""
    from ragkit.pipeline.chunk import get_chunker
    from ragkit.pipeline.index import _stored_doc

    write_pdf(tmp_path / "r.pdf", pages(2, n=5))
    async with make_rag(tmp_path) as rag:
        loaded, _ = await rag.ainsert(paths=[tmp_path / "r.pdf"])
        [doc] = loaded.documents
        [record] = await rag.stores.full_docs.get_many([doc.id])
        [status] = await rag.stores.doc_status.get([doc.id])
        stored = _stored_doc(doc.id, record)
        assert stored.segments == doc.segments and stored.unit == "page"
        chunker = get_chunker("token", rag.tokenizer, 48, 8)
        assert [c.id for c in chunker.chunk(stored)] == status.chunk_ids
        assert len(status.chunk_ids) >= 3
        assert await rag.adelete([doc.id]) == [doc.id]
        assert not [k async for k in rag.stores.chunks.keys()]
