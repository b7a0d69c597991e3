"""TokenCounts counts a text given in pieces exactly: what the context's
reported token counts rest on. Hypothesis prints the pieces of a failure; a
mismatch means a boundary was promised (``splits_between``) where the
tokenizer merges across it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragkit.query.counting import TokenCounts
from ragkit.tokenizer import TiktokenTokenizer

PIECES = ['{"ref": 12,', ' "content": "a\\nb"}', "\n", "\n\n", "```json", "```", "-----Entities-----",
          '{"entity": "X", "description": "d.",', ' "refs": [1, 2]}', "[3] doc-1f", " ", "/x", "é漢", "'s"]


class Promiseless:
    """o200k_base without ``splits_between``."""

    def __init__(self) -> None:
        self.inner = TiktokenTokenizer({"encoding": "o200k_base"})
        self.name = "o200k-promiseless"

    def count(self, text: str) -> int:
        return self.inner.count(text)


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base", "promiseless"])
def counts(request):
    tok = Promiseless() if request.param == "promiseless" else TiktokenTokenizer({"encoding": request.param})
    return TokenCounts(tok)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=10))
def test_joined_pieces_count_as_the_joined_text(counts, pieces):
    assert counts.joined(pieces) == counts.tokenizer.count("".join(pieces))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6), min_size=1, max_size=4))
def test_each_text_and_their_join_count_exactly(counts, texts):
    each, whole = counts.joined_each(texts, "\n\n")
    assert each == [counts.tokenizer.count("".join(t)) for t in texts]
    assert whole == counts.tokenizer.count("\n\n".join("".join(t) for t in texts))


def test_a_tokenizer_that_promises_nothing_is_counted_whole():
    counts = TokenCounts(Promiseless())
    assert counts.groups(["a", " b", "\n", "{c"]) == ["a b\n{c"]
    promising = TokenCounts(TiktokenTokenizer())
    assert promising.groups(["a", " b", "\n", "{c"]) == ["a", " b\n", "{c"]
