"""The chunk stage: token windows that never split a character, and Markdown sections.

The rules are in the docstring of ``ragkit.pipeline.chunk``. Hypothesis prints
the smallest text that breaks a property; ``token_spans(text, tok, size,
overlap)`` on it shows the windows.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragkit.errors import ConfigError
from ragkit.plugins import get_registry
from ragkit.pipeline.chunk import (
    Chunker,
    MarkdownChunker,
    TokenChunker,
    get_chunker,
    token_spans,
)
from ragkit.schema import Document
from ragkit.tokenizer import TiktokenTokenizer

TOK = TiktokenTokenizer()

CJK = "汉字测试的文本。日本語のテキスト、한국어 텍스트"
EMOJI = "😀🎉👩‍👩‍👧🇺🇳🙂👍🏽"
MIXED = "ẞ𝔘𝔫𝔦𝔠𝔬𝔡𝔢 é (e\u0301) Ωmega ﬁ"

# Text that stresses byte-level BPE: multi-byte characters of every length,
# joiners, combining marks, whitespace runs and ordinary words.
unicode_text = st.lists(
    st.one_of(
        st.characters(exclude_categories=("Cs",)),
        st.sampled_from([*CJK, *EMOJI, *MIXED, " ", "\n", "\n\n", "the ", "word"]),
    ),
    max_size=300,
).map("".join)


# --- configuration -------------------------------------------------------------------


@pytest.mark.parametrize("size, overlap", [(100, 100), (100, 150), (100, -1), (3, 0), (0, 0), (100.0, 10)])
def test_bad_windows_are_refused_with_a_clear_message(size, overlap):
    for cls in (TokenChunker, MarkdownChunker):
        with pytest.raises(ConfigError, match="chunk (size|overlap) must"):
            cls(TOK, size, overlap)


def test_chunkers_are_plugins_found_by_name_or_import_path():
    assert {"token", "markdown"} <= set(get_registry().names("chunker"))
    assert isinstance(get_chunker("token", TOK, 64, 8), TokenChunker)
    markdown = get_chunker("markdown", TOK, 64, 8)
    assert isinstance(markdown, MarkdownChunker) and isinstance(markdown, Chunker)
    assert isinstance(get_chunker("ragkit.pipeline.chunk:MarkdownChunker", TOK, 64, 8), MarkdownChunker)
    with pytest.raises(ConfigError, match="no chunker adapter named 'pdf'. Installed: markdown, token"):
        get_chunker("pdf", TOK, 64, 8)


# --- token windows -----------------------------------------------------------------------


def test_windows_step_by_size_minus_overlap_on_plain_text():
    text = " ".join(f"word{i}" for i in range(1000))
    spans = token_spans(text, TOK, 100, 20)
    n = TOK.count(text)
    assert len(spans) == -(-(n - 20) // 80)  # ceil((n - overlap) / step)
    assert all(s.tokens <= 100 for s in spans)
    assert spans[0].start == 0 and spans[-1].end == len(text)
    for a, b in zip(spans, spans[1:]):
        assert TOK.count(text[b.start:a.end]) in range(18, 23)  # about `overlap` tokens shared


def test_chunks_are_exact_substrings_with_their_token_counts():
    doc = Document.from_text(("Alpha beta gamma. " * 300) + CJK * 20, file_path="a.md")
    chunker = TokenChunker(TOK, 50, 10)
    chunks = chunker.chunk(doc)
    spans = chunker.spans(doc.content)
    assert [c.content for c in chunks] == [doc.content[s.start:s.end] for s in spans]
    for order, chunk in enumerate(chunks):
        assert chunk.order == order and chunk.doc_id == doc.id and chunk.file_path == "a.md"
        assert chunk.tokens == TOK.count(chunk.content) <= 50


@pytest.mark.parametrize("text", [CJK * 50, EMOJI * 50, MIXED * 50, (CJK + EMOJI + MIXED + " ok ") * 30])
@pytest.mark.parametrize("size, overlap", [(4, 0), (5, 3), (7, 2), (16, 5), (100, 30)])
def test_cjk_and_emoji_never_become_replacement_characters(text, size, overlap):
    assert TOK.decode(TOK.encode(text)) == text
    spans = token_spans(text, TOK, size, overlap)
    assert spans[0].start == 0 and spans[-1].end == len(text)
    for span in spans:
        content = text[span.start:span.end]
        assert "\ufffd" not in content
        assert span.tokens == TOK.count(content) <= size


def test_a_window_edge_inside_a_character_moves_to_its_start():
    # "汉" is two cl100k tokens, so a 1-token boundary would cut it in half.
    text = "汉" * 10
    assert len(TOK.encode("汉")) == 2
    spans = token_spans(text, TOK, 5, 1)
    assert all(s.end > s.start for s in spans)
    assert "".join(text[s.start:s.end] for s in spans).replace("汉", "") == ""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=unicode_text, size=st.integers(4, 48), overlap=st.integers(0, 47))
def test_token_windows_properties(text, size, overlap):
    overlap %= size
    spans = token_spans(text, TOK, size, overlap)
    if not text:
        assert spans == []
        return
    assert spans[0].start == 0 and spans[-1].end == len(text)  # covers the whole text
    for span in spans:
        content = text[span.start:span.end]
        assert span.end > span.start
        assert span.tokens == TOK.count(content) <= size
        if "\ufffd" not in text:
            assert "\ufffd" not in content
    for a, b in zip(spans, spans[1:]):
        assert a.start < b.start <= a.end  # in order, no gap
        if overlap >= 4 and a.tokens > overlap + 4:
            # Four tokens hold at least one whole character, so the windows share text.
            assert b.start < a.end


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=unicode_text, size=st.integers(4, 48), overlap=st.integers(0, 47))
def test_token_chunks_keep_everything_but_whitespace(text, size, overlap):
    overlap %= size
    chunker = TokenChunker(TOK, size, overlap)
    doc = Document.from_text(text)
    chunks = chunker.chunk(doc)
    spans = chunker.spans(text)
    kept = [s for s in spans if text[s.start:s.end].strip()]
    assert [c.content for c in chunks] == [text[s.start:s.end] for s in kept]
    assert [c.order for c in chunks] == list(range(len(chunks)))
    assert len({c.id for c in chunks}) == len(chunks)


def test_whitespace_only_windows_are_dropped():
    text = "start" + " " * 500 + "\n" * 500 + "end"
    chunks = TokenChunker(TOK, 8, 0).chunk(Document.from_text(text))
    assert chunks[0].content.startswith("start") and chunks[-1].content.endswith("end")
    assert all(c.content.strip() for c in chunks)
    assert TokenChunker(TOK, 8, 0).chunk(Document.from_text(" \n\t ")) == []


def test_empty_document_has_no_chunks():
    assert TokenChunker(TOK).chunk(Document(id="doc-empty", content="")) == []


# --- ids ------------------------------------------------------------------------------------


def test_chunk_ids_are_deterministic_and_unique_per_document():
    text = "the same paragraph again. " * 400  # many identical windows
    doc = Document.from_text(text, file_path="a.txt")
    first = TokenChunker(TOK, 30, 0).chunk(doc)
    again = TokenChunker(TOK, 30, 0).chunk(Document.from_text(text, file_path="a.txt"))
    assert [c.id for c in first] == [c.id for c in again]
    assert len({c.content for c in first}) < len(first)  # contents repeat...
    assert len({c.id for c in first}) == len(first)  # ...ids do not
    other = TokenChunker(TOK, 30, 0).chunk(Document.from_text(text + " tail"))
    assert first[0].content == other[0].content
    assert not {c.id for c in first} & {c.id for c in other}
    assert all(c.id.startswith("chunk-") for c in first)


# --- tokenizers other than tiktoken ------------------------------------------------------------------


class CharTokenizer:
    """One token per character: single-token decode is exact."""

    name = "chars"

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(map(chr, tokens))

    def count(self, text: str) -> int:
        return len(text)


class ByteTokenizer:
    """One token per UTF-8 byte: splits every multi-byte character."""

    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, tokens: Sequence[int]) -> str:
        return bytes(tokens).decode("utf-8", errors="replace")

    def count(self, text: str) -> int:
        return len(text.encode("utf-8"))


class ByteTokenizerWithBytes(ByteTokenizer):
    def token_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        return [bytes([t]) for t in tokens]


def test_a_character_tokenizer_works_through_decode():
    spans = token_spans("abcdefghij", CharTokenizer(), 4, 1)
    assert [(s.start, s.end) for s in spans] == [(0, 4), (3, 7), (6, 10)]


def test_a_byte_tokenizer_needs_token_bytes():
    with pytest.raises(ValueError, match="token_bytes"):
        token_spans(CJK, ByteTokenizer(), 8, 2)
    spans = token_spans(CJK + EMOJI, ByteTokenizerWithBytes(), 8, 2)
    text = CJK + EMOJI
    assert spans[-1].end == len(text)
    assert all("\ufffd" not in text[s.start:s.end] and s.tokens <= 8 for s in spans)


# --- markdown ----------------------------------------------------------------------------------------

GUIDE = """Preamble before any heading.

# Intro

Intro paragraph.

## Setup

Install it:

```bash
# this is a comment, not a heading
pip install ragkit
```

Then configure it.

### Deep

Deep text.

# Usage ##

Use it.
"""


def markdown_chunks(text: str, size: int, overlap: int = 0):
    return MarkdownChunker(TOK, size, overlap).chunk(Document.from_text(text))


def test_small_markdown_is_one_chunk():
    chunks = markdown_chunks(GUIDE, 500)
    assert [c.content for c in chunks] == [GUIDE]


def first_lines(chunker: MarkdownChunker, text: str) -> dict[str, str]:
    """Each piece's first body line and its prefix."""
    return {text[p.start:p.end].split("\n", 1)[0]: p.prefix for p in chunker.pieces(text)}


def test_sections_carry_their_heading_path():
    assert first_lines(MarkdownChunker(TOK, 40, 0), GUIDE) == {
        "Preamble before any heading.": "",
        "## Setup": "Intro > Setup\n\n",  # packed with its subsection
        "# Usage ##": "",  # a top-level heading already says it
    }
    assert first_lines(MarkdownChunker(TOK, 30, 0), GUIDE) == {
        "Preamble before any heading.": "",
        "```bash": "Intro > Setup\n\n",  # a block of the split Setup section
        "### Deep": "Intro > Setup > Deep\n\n",
    }
    chunks = MarkdownChunker(TOK, 30, 0).chunk(Document.from_text(GUIDE))
    deep = next(c for c in chunks if "Deep text" in c.content)
    assert deep.content.startswith("Intro > Setup > Deep\n\n### Deep")


def test_a_hash_line_inside_fenced_code_is_not_a_heading():
    chunker = MarkdownChunker(TOK, 40, 0)
    for piece in chunker.pieces(GUIDE):
        body = GUIDE[piece.start:piece.end]
        assert not body.startswith("# this is a comment")
        assert body.count("```") in (0, 2)  # the code block is never cut


def test_fenced_code_stays_whole_when_its_section_is_split():
    code = "```python\n" + "\n".join(f"# step {i}\nx{i} = {i}" for i in range(12)) + "\n```\n"
    text = "# Code\n\n" + "Words here. " * 40 + "\n\n" + code + "\nAfter the code.\n"
    size = TOK.count(code) + 20
    pieces = MarkdownChunker(TOK, size, 0).pieces(text)
    assert len(pieces) > 1
    assert any(text[p.start:p.end].startswith(code) for p in pieces)
    assert all(p.tokens <= size for p in pieces)


def test_an_oversized_section_falls_back_to_token_windows():
    text = "# Big\n\n" + ("word " * 2000) + "\n\n## Small\n\nsmall text\n"
    chunker = MarkdownChunker(TOK, 64, 8)
    pieces = chunker.pieces(text)
    assert len(pieces) > 20
    assert all(p.tokens <= 64 for p in pieces)
    continuation = pieces[1]
    assert continuation.prefix == "Big\n\n"  # the window does not start at its heading
    assert text[pieces[-1].start:pieces[-1].end] == "## Small\n\nsmall text\n"
    chunks = chunker.chunk(Document.from_text(text))
    assert all(c.tokens == TOK.count(c.content) <= 64 for c in chunks)


def test_a_very_long_heading_path_is_shortened_not_allowed_to_fill_the_chunk():
    title = " ".join(["long"] * 40)
    text = f"# {title}\n\n## Short\n\n" + "body text. " * 200
    pieces = MarkdownChunker(TOK, 64, 0).pieces(text)
    assert {p.prefix for p in pieces} <= {"", "Short\n\n"}
    assert all(p.tokens <= 64 for p in pieces)


markdown_text = st.lists(
    st.one_of(
        st.sampled_from(["# A", "## B b", "### C", "#### D", "# ", "#nope", "```", "~~~", "", "", "text"]),
        unicode_text.map(lambda t: t.replace("\r", "")),
    ),
    max_size=40,
).map("\n".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=markdown_text, size=st.integers(4, 80), overlap=st.integers(0, 79))
def test_markdown_pieces_properties(text, size, overlap):
    overlap %= size
    chunker = MarkdownChunker(TOK, size, overlap)
    pieces = chunker.pieces(text)
    if not text:
        assert pieces == []
        return
    assert pieces[0].start == 0 and pieces[-1].end == len(text)
    for piece in pieces:
        body = text[piece.start:piece.end]
        assert piece.tokens == TOK.count(piece.prefix + body) <= size
        if "\ufffd" not in text:
            assert "\ufffd" not in body
    for a, b in zip(pieces, pieces[1:]):
        assert a.start < b.start <= a.end  # in order, no gap
    chunks = chunker.chunk(Document.from_text(text))
    assert all(c.tokens <= size and c.content.strip() for c in chunks)
    assert len({c.id for c in chunks}) == len(chunks)


def test_markdown_chunking_is_deterministic():
    doc = Document.from_text(GUIDE * 20)
    first = MarkdownChunker(TOK, 60, 10).chunk(doc)
    second = MarkdownChunker(TOK, 60, 10).chunk(Document.from_text(GUIDE * 20))
    assert [(c.id, c.content, c.tokens) for c in first] == [(c.id, c.content, c.tokens) for c in second]
