"""Token counting helpers of ragkit.core.tokens, and the token boundaries
TiktokenTokenizer promises (what lets the query side count a context from the
counts of its pieces, ``ragkit/query/counting.py``).

If ``test_promised_boundaries_hold`` fails, tiktoken's pieces span a pair of
characters ``splits_between`` says they never span: Hypothesis prints the two
texts. Narrow ``TiktokenTokenizer.splits_between`` (or drop the encoding's
pattern from ``_CHECKED_PATTERNS``) until it holds.
"""

from __future__ import annotations

import sys

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragkit.core.tokens import request_tokens, splits_between
from ragkit.protocols import ChatRequest
from ragkit.protocols.models import Message
from ragkit.tokenizer import TiktokenTokenizer

ENCODINGS = ["cl100k_base", "o200k_base"]
# Characters that decide where tiktoken's pieces end: every kind of whitespace,
# line breaks, the slash o200k's punctuation pieces take after line breaks,
# apostrophes (contractions), digits, cased and uncased letters, marks, CJK,
# JSON punctuation, emoji.
ALPHABET = list(" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000/'\"{}[]:,.-_!?09aAsStTé\u0301漢字🙂") + ["'s", "'ll", "12345"]
texts = st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=12).map("".join)


@pytest.fixture(scope="module", params=ENCODINGS)
def tok(request):
    return TiktokenTokenizer({"encoding": request.param})


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=texts, b=texts)
def test_promised_boundaries_hold(tok, a, b):
    if splits_between(tok, a[-1], b[0]):
        assert tok.count(a + b) == tok.count(a) + tok.count(b)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_boundaries_a_context_relies_on_are_promised(encoding):
    tok = TiktokenTokenizer({"encoding": encoding})
    assert splits_between(tok, ",", " ") and splits_between(tok, "}", " ")  # between JSON members
    assert all(splits_between(tok, "\n", c) for c in '{-["a1')  # at the start of a line
    assert not splits_between(tok, "}", "\n") and not splits_between(tok, "\n", " ")
    assert not splits_between(tok, "\n", "/")  # o200k: "}\n/" is one piece


def test_whitespace_as_python_sees_it_covers_the_patterns_whitespace():
    """splits_between tests ``str.isspace``; the patterns test ``\\s``: every
    character ``\\s`` matches must be a space to Python too, or a boundary
    could be promised where a whitespace run goes on."""
    space = regex.compile(r"\s")
    missed = [hex(c) for c in range(sys.maxunicode + 1) if space.match(chr(c)) and not chr(c).isspace()]
    assert not missed


def test_a_tokenizer_without_the_method_promises_nothing():
    class Chars:
        name = "chars"

        def count(self, text: str) -> int:
            return len(text)

    assert not splits_between(Chars(), ",", " ")


def test_request_tokens_counts_every_message():
    tok = TiktokenTokenizer()
    request = ChatRequest(prompt="one two", system="three", history=(Message(role="user", content="four five"),))
    assert request_tokens(tok, request) == tok.count("one two") + tok.count("three") + tok.count("four five")
