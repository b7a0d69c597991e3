"""Issue 32 item 1: an answer's references are the sources it cites, numbered
in the order it first cites them; every source of the context stays in
``sources``. Troubleshooting: ``ragkit/query/cited.py`` parses and renumbers
the markers, ``query/engine.py`` applies it to whole and streamed answers."""

from __future__ import annotations

import re

import pytest

from ragkit.schema import Reference
from ragkit.testing import ScriptedLLM

from .conftest import make_rag

SOURCE_LINE = re.compile(r"^\[(\d+)\] ", re.M)


def sources(n: int) -> list[Reference]:
    return [Reference(number=i, source_number=i, doc_id=f"doc-{i}", file_path=f"f{i}.md") for i in range(1, n + 1)]


def test_markers_are_renumbered_in_order_of_first_citation():
    from ragkit.query.cited import cited  # here: the engine's tests below run (and fail) without it

    text, refs = cited("Gu Yao leads Haijia [6]. Its boards slipped [3][6], see [2, 6].", sources(13))
    assert text == "Gu Yao leads Haijia [1]. Its boards slipped [2][1], see [3][1]."
    assert [(r.number, r.source_number, r.doc_id) for r in refs] == [(1, 6, "doc-6"), (2, 3, "doc-3"), (3, 2, "doc-2")]


def test_brackets_that_are_not_sources_stay_text():
    from ragkit.query.cited import cited

    text, refs = cited("In [2025] the list [a] and [1, 99] stayed; [4] is cited.", sources(5))
    assert text == "In [2025] the list [a] and [1, 99] stayed; [1] is cited."
    assert [r.doc_id for r in refs] == ["doc-4"]


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_a_marker_split_across_streamed_pieces_is_renumbered(size):
    from ragkit.query.cited import Citations, cited

    answer = "First [12]. Then [3, 12] and [ 7 ]. A bracket [ that is text. End [3]"
    whole = cited(answer, sources(13))
    citations = Citations(sources(13))
    pieces = [citations.feed(answer[i:i + size]) for i in range(0, len(answer), size)] + [citations.end()]
    assert "".join(pieces) == whole[0] == "First [1]. Then [2][1] and [3]. A bracket [ that is text. End [2]"
    assert citations.references == whole[1]


def test_a_quoted_claim_narrows_its_source_to_the_chunks_that_hold_it():
    from ragkit.query.cited import Citations
    from ragkit.schema import Location

    pages = [Location(char_start=0, char_end=50, page_start=1, page_end=1),
             Location(char_start=50, char_end=99, page_start=7, page_end=7)]
    memo = Reference(number=2, source_number=2, doc_id="memo", file_path="memo.pdf", chunk_ids=["c1", "c2"],
                     locations=pages, citation="memo.pdf p. 1, 7")
    other = Reference(number=1, source_number=1, doc_id="other", file_path="other.md", chunk_ids=["c3"])
    contents = {"c1": "Gu Yao leads   Project Haijia.", "c2": "The CB-7\nboards slipped by three weeks.",
                "c3": "Something else entirely."}
    answer = "- The CB-7 boards slipped by three weeks. [2]\n- Something else entirely. [1]"
    whole = Citations([other, memo], contents)
    assert whole.rewrite(answer) == "- The CB-7 boards slipped by three weeks. [1]\n- Something else entirely. [2]"
    cited_memo, cited_other = whole.references
    assert (cited_memo.chunk_ids, cited_memo.citation) == (["c2"], "memo.pdf p. 7")
    assert cited_other.chunk_ids == ["c3"]
    streamed = Citations([other, memo], contents)  # the same, a character at a time
    assert "".join([*(streamed.feed(ch) for ch in answer), streamed.end()]) == whole.rewrite(answer)
    assert streamed.references[0].chunk_ids == ["c2"]
    paraphrase = Citations([other, memo], contents)
    paraphrase.rewrite("The memo says boards were late [2].")
    assert paraphrase.references[0].chunk_ids == ["c1", "c2"]  # not quoted: every chunk of the source
    mixed = Citations([other, memo], contents)
    mixed.rewrite("- The CB-7 boards slipped by three weeks. [2] And a paraphrase of the memo [2].")
    assert mixed.references[0].chunk_ids == ["c1", "c2"]  # one claim is not a quote: it may rest on any chunk


def _citing(request) -> str:
    """An answer citing the context's last source, then its first and last."""
    if request.role == "keywords":
        return '{"high_level_keywords": ["editor"], "low_level_keywords": ["journal"]}'
    numbers = [int(n) for n in SOURCE_LINE.findall(request.system or "")]
    first, last = numbers[0], numbers[-1]
    return f"One claim [{last}]. Another [{first}, {last}]."


@pytest.mark.parametrize("mode", ["naive", "mix"])
@pytest.mark.parametrize("stream", [False, True])
async def test_references_are_the_cited_sources_and_sources_all_of_the_context(workdir, questions, mode, stream):
    async with make_rag(workdir, llm=ScriptedLLM(script=_citing, options={"chunk_size": 3})) as rag:
        result = await rag.aquery(questions[0]["question"], mode=mode, stream=stream)
        if stream:
            assert "".join([piece async for piece in result.stream]) == result.answer
    numbers = [int(n) for n in SOURCE_LINE.findall(result.context)]
    assert len(numbers) >= 3, "the question should find at least three sources"
    assert [s.number for s in result.sources] == numbers  # every source of the context, its own numbering
    last, first = result.sources[-1], result.sources[0]
    assert result.answer == "One claim [1]. Another [2][1]."
    assert [(r.number, r.source_number, r.doc_id) for r in result.references] == [
        (1, last.number, last.doc_id), (2, first.number, first.doc_id)]
    assert result.references[0].chunk_ids == last.chunk_ids


async def test_context_only_has_sources_and_no_references(workdir, questions):
    async with make_rag(workdir) as rag:
        result = await rag.aquery(questions[0]["question"], mode="mix", only_need_context=True)
    assert result.sources and result.references == []


async def test_the_offline_answer_cites_the_sources_of_its_quoted_sentences(workdir, questions):
    from ragkit.offline.llm import OfflineLLM

    async with make_rag(workdir, llm=OfflineLLM()) as rag:
        result = await rag.aquery(questions[0]["question"], mode="mix")
    cited_numbers = [int(n) for n in re.findall(r"\[(\d+)\]$", result.answer, re.M)]
    assert cited_numbers and sorted(set(cited_numbers)) == list(range(1, len(result.references) + 1))
    assert len(result.references) < len(result.sources)
    by_number = {r.number: r for r in result.references}
    contents = {c["id"]: " ".join(c["content"].split()) for c in result.chunks}
    for line in result.answer.splitlines():
        quoted = re.fullmatch(r"- (.+) \[(\d+)\]", line)
        if quoted:  # the quoted sentence is in a chunk of the source it cites
            ref = by_number[int(quoted.group(2))]
            assert any(quoted.group(1) in contents.get(c, "") for c in ref.chunk_ids), line
