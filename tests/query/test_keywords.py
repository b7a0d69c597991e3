"""Keyword answers are untrusted model output: parsed defensively, never raising."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ragkit.query.keywords import MAX_KEYWORD_CHARS, MAX_KEYWORDS, extract_keywords, parse_keywords
from ragkit.testing.musique_keywords import EntityNames, content_words, question_keywords

GOOD = {"high_level_keywords": ["supplier delay"], "low_level_keywords": ["Yingchuan", "Project Haijia"]}


def test_plain_json():
    assert parse_keywords(json.dumps(GOOD))[:2] == (["supplier delay"], ["Yingchuan", "Project Haijia"])


def test_prose_fences_and_key_spellings():
    text = 'Sure! Here you go:\n```json\n{"High_Level": "delay, schedule", "entities": ["Gu Yao", "gu yao", " "]}\n```'
    high, low, warnings = parse_keywords(text)
    assert high == ["delay", "schedule"] and low == ["Gu Yao"] and warnings == []


def test_garbage_gives_a_warning_not_an_error():
    for text in ("", "I cannot help with that.", "{not json", '["a", "b"]', '{"other": 1}'):
        high, low, warnings = parse_keywords(text)
        assert high == low == [] and warnings


def test_limits_are_applied():
    many = {"low_level_keywords": [f"name {i}" for i in range(100)], "high_level_keywords": ["x" * 1000]}
    high, low, _ = parse_keywords(json.dumps(many))
    assert len(low) == MAX_KEYWORDS and len(high[0]) == MAX_KEYWORD_CHARS


@settings(max_examples=300, deadline=None)
@given(st.text(), st.sampled_from(["", "```", "```json\n", "Answer: "]))
def test_any_text_parses_without_raising(text, prefix):
    high, low, warnings = parse_keywords(prefix + text)
    assert all(isinstance(k, str) and k for k in high + low)
    assert bool(high or low) or warnings


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
def test_any_json_value_parses_without_raising(value):
    doc = {"high_level_keywords": value, "low_level_keywords": value}
    high, low, _ = parse_keywords(json.dumps(doc))
    assert all(isinstance(k, str) for k in high + low)


async def test_user_keywords_win_and_empty_answers_fall_back_to_the_question():
    given_kw = await extract_keywords("q?", high=["a"], low=None, llm=None)
    assert (given_kw.high_level, given_kw.low_level, given_kw.source) == (["a"], [], "user")
    fallback = await extract_keywords("What is ragkit?", llm=None)
    assert fallback.source == "question" and fallback.low_level == ["What is ragkit?"]


def test_musique_keyword_rule_longest_match_on_word_boundaries():
    names = EntityNames(["Journal", "Journal of Psychotherapy Integration", "Integration", "APA", "PA"])
    high, low = question_keywords("Who founded the Journal of Psychotherapy Integration and the APA?", names)
    assert low == ["Journal of Psychotherapy Integration", "APA"]  # not "PA" inside "APA"
    assert high == content_words("Who founded the Journal of Psychotherapy Integration and the APA?")
    assert "the" not in high and "founded" in high
