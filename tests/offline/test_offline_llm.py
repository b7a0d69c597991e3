"""The offline LLM at each prompt the pipeline sends: keywords, summaries,
answers (extractive, cited), bypass, streaming, identity.

Troubleshoot: ``OfflineLLM().respond(request)`` gives the text synchronously;
build the request with the pipeline's own builders, as these tests do.
"""

from __future__ import annotations

import json
import re

import pytest

from ragkit.core.prompts import (
    COMPLETE_MARKER,
    SUMMARY_PROMPT,
    build_extraction_request,
    build_gleaning_request,
    build_keywords_request,
    build_summary_request,
)
from ragkit.offline import NOTICE, OfflineLLM, notice_once
from ragkit.offline.answer import BYPASS, BYPASS_ZH, NOTICE_EN, NOTICE_ZH
from ragkit.offline.keywords import statements_of, summarise
from ragkit.offline.llm import OTHER
from ragkit.protocols import ChatRequest
from ragkit.query.answer import build_answer_request, build_bypass_request
from ragkit.query.keywords import parse_keywords
from ragkit.testing.process_state import offline_notice_unsent

CONTEXT = "\n".join([
    "-----Entities (knowledge graph)-----",
    json.dumps({"entity": "Project Haijia", "type": "other", "description": "...", "refs": [1, 2]}),
    json.dumps({"entity": "Gu Yao", "type": "person", "description": "...", "refs": [1]}),
    json.dumps({"entity": "Yingchuan Electronics", "type": "organization", "description": "...", "refs": [2, 3]}),
    "",
    "-----Relations (knowledge graph)-----",
    json.dumps({"entity1": "Gu Yao", "entity2": "Project Haijia", "keywords": "led", "description": "...", "refs": [1]}),
    "",
    "-----Source chunks-----",
    json.dumps({"ref": 1, "content": "# Project Haijia\n\nGu Yao has led Project Haijia since January 2024. "
                                     "The buoy housings come from Lianhua Castings."}),
    json.dumps({"ref": 2, "content": "In February 2025 the delivery of the control boards for Project Haijia "
                                     "slipped by three weeks."}),
    json.dumps({"ref": 3, "content": "Yingchuan Electronics is a contract manufacturer based in Suzhou. "
                                     "Shen Mo leads Project Qinghe from the Jinan office."}),
    json.dumps({"ref": 4, "content": "海佳项目为宁波港务局研制沿海监测浮标，由顾瑶负责。颖川电子为海佳项目生产的控制板交付推迟了三周。"}),
    "",
    "-----References-----",
    "[1] en/project-haijia.md",
])
QUESTION = "Who leads the project whose supplier's delivery slipped?"


@pytest.fixture
def llm() -> OfflineLLM:
    return OfflineLLM()


def answer_request(question: str, context: str = CONTEXT) -> ChatRequest:
    return build_answer_request(question, context, history=[], response_type="Multiple Paragraphs", language="English")


async def both(llm: OfflineLLM, request: ChatRequest) -> str:
    """The answer from ``complete`` (an extraction's or a summary's: the worker
    process's), checked equal to the one the rules give in this process."""
    text = (await llm.complete(request)).text
    assert llm.respond(request) == text
    return text


def cited(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\[(\d+)\]", text)]


async def test_keywords_are_json_with_names_low_and_content_words_high(llm):
    out = await llm.complete(build_keywords_request("How did the delay at Yingchuan affect Project Haijia?"))
    data = json.loads(out.text)
    assert set(data) == {"high_level_keywords", "low_level_keywords"}
    high, low, warnings = parse_keywords(out.text)
    assert not warnings
    assert set(low) == {"Yingchuan", "Project Haijia"}
    assert "delay" in high and "affect" in high and not {"Yingchuan", "Project Haijia"} & set(high)


def test_the_question_is_read_back_from_the_keywords_prompt():
    """Troubleshoot: ``KEYWORDS_PROMPT`` changed; fix ``ragkit.offline.keywords.QUESTION_MARK``."""
    from ragkit.offline.keywords import question_of

    for question in (QUESTION, "多行\n\nQuestion: 问题？", ""):
        assert question_of(build_keywords_request(question).prompt) == question


async def test_keywords_in_chinese_and_without_names(llm):
    high, low, _ = parse_keywords((await llm.complete(build_keywords_request("顾瑶负责的项目由哪家供应商供货？"))).text)
    assert low == ["顾瑶"] and {"项目", "供应商", "供货"} <= set(high)
    high, low, _ = parse_keywords((await llm.complete(build_keywords_request(QUESTION))).text)
    assert {"project", "supplier", "delivery slipped"} <= set(high)
    assert low == high  # no named thing: the content words stand in, so local search has input


async def test_gleaning_gets_the_marker_only(llm):
    first = build_extraction_request("Gu Yao leads Project Haijia.")
    answer = await both(llm, first)
    assert "Gu Yao" in answer and answer.endswith(COMPLETE_MARKER)
    assert await both(llm, build_gleaning_request(first, answer)) == COMPLETE_MARKER


async def test_extraction_uses_the_prompts_entity_types(llm):
    request = build_extraction_request("Gu Yao leads Project Haijia.", entity_types=["person", "project"])
    text = await both(llm, request)
    assert "entity<|#|>Project Haijia<|#|>project<|#|>" in text
    assert "entity<|#|>Gu Yao<|#|>person<|#|>" in text


async def test_an_extraction_prompt_without_entity_types_gets_the_default_ones(llm):
    request = build_extraction_request("Gu Yao leads Project Haijia.", entity_types=["project"])
    untyped = request.model_copy(update={"prompt": re.sub(r"^Entity types: .*\n", "", request.prompt, flags=re.M)})
    assert "Entity types" not in untyped.prompt
    text = await both(llm, untyped)
    assert "entity<|#|>Gu Yao<|#|>person<|#|>" in text and "<|#|>project<|#|>" not in text


async def test_summary_is_extractive_and_within_max_tokens(llm):
    lines = [f"Statement {i}: Gu Yao reviewed the schedule of batch {i} with supplier number {i}." for i in range(30)]
    lines.append("Gu Yao leads Project Haijia.")
    request = build_summary_request("Gu Yao", lines, language="English", max_tokens=60)
    out = await both(llm, request)
    kept = out.split("\n")
    assert kept and set(kept) <= set(lines)
    assert llm.tokenizer.count(out) <= 60
    assert kept == sorted(kept, key=lines.index)  # original order
    everything = await both(llm, build_summary_request("X", lines[:3], language="English", max_tokens=500))
    assert everything.split("\n") == lines[:3]


async def test_a_summary_of_one_statement_longer_than_max_tokens_is_its_start(llm):
    statement = " ".join(f"Gu Yao inspected buoy {i} of Project Haijia." for i in range(20))
    out = await both(llm, build_summary_request("Gu Yao", [statement], language="English", max_tokens=12))
    assert statement.startswith(out) and 8 <= llm.tokenizer.count(out) <= 12


async def test_answer_quotes_cited_sentences_and_says_no_model_was_used(llm):
    """Each line is a sentence of a chunk followed by that chunk's reference;
    the second hop (who leads Project Haijia) comes through the bridge name."""
    text = (await llm.complete(answer_request(QUESTION))).text
    first, blank, *lines = text.split("\n")
    assert first == NOTICE_EN and "No generative model was used" in first and blank == ""
    assert lines and set(cited(text)) <= {1, 2, 3, 4}
    chunks = {row["ref"]: row["content"] for row in map(json.loads, re.findall(r'^\{"ref".*$', CONTEXT, re.M))}
    for line in lines:
        sentence, ref = re.fullmatch(r"- (.*) \[(\d+)\]", line).groups()
        assert sentence in " ".join(chunks[int(ref)].split())
    assert lines[0].endswith("[2]") and "slipped" in lines[0]
    assert any("Gu Yao" in line and line.endswith("[1]") for line in lines)
    assert not any("Lianhua" in line for line in lines)  # shares nothing with the question


async def test_answer_in_chinese(llm):
    text = (await llm.complete(answer_request("交付推迟的供应商所供货的项目由谁负责？"))).text
    assert text.startswith(NOTICE_ZH)
    assert any("顾瑶" in line and line.endswith("[4]") for line in text.split("\n"))


async def test_answer_with_nothing_relevant_says_so(llm):
    text = (await llm.complete(answer_request("What colour is the sky?"))).text
    assert text.startswith(NOTICE_EN) and "no sentence" in text and not cited(text)
    empty = (await llm.complete(answer_request(QUESTION, context=""))).text
    assert empty.startswith(NOTICE_EN) and not cited(empty)


async def test_bypass_says_offline_mode_needs_context(llm):
    request = build_bypass_request(QUESTION, history=[], response_type="x", language="English")
    assert (await llm.complete(request)).text == BYPASS
    assert "cannot answer without context" in BYPASS
    chinese = build_bypass_request("海佳项目由谁负责？", history=[], response_type="x", language="Chinese")
    assert (await llm.complete(chinese)).text == BYPASS_ZH  # in the question's language
    assert "无法在没有上下文的情况下回答" in BYPASS_ZH


@pytest.mark.parametrize("request_", [
    answer_request(QUESTION), answer_request("交付推迟的项目由谁负责？"),
    build_extraction_request("Gu Yao leads Project Haijia. 海佳项目由顾瑶负责。"),
    build_keywords_request(QUESTION),
], ids=["answer", "answer-zh", "extraction", "keywords"])
async def test_streaming_equals_complete(llm, request_):
    pieces = [p async for p in llm.stream(request_)]
    assert len(pieces) > 1 and "".join(pieces) == (await llm.complete(request_)).text


async def test_identity_usage_and_roles_told_apart_without_the_role(llm):
    assert llm.model_id == "offline-rules-v1" == OfflineLLM().model_id
    assert OfflineLLM({"answer_sentences": 2}).model_id != llm.model_id
    out = await llm.complete(answer_request(QUESTION))
    assert out.usage.input_tokens > 100 and out.usage.output_tokens > 10
    summary = build_summary_request("Gu Yao", ["Gu Yao leads Project Haijia."], language="English", max_tokens=50)
    for request in (answer_request(QUESTION), build_keywords_request(QUESTION), build_extraction_request("Gu Yao."),
                    summary):
        untagged = request.model_copy(update={"role": "other"})
        assert llm.respond(untagged) == llm.respond(request) != OTHER
    assert "no generative model" in llm.respond(ChatRequest(prompt="Say OK."))


def test_answer_sentences_option_limits_the_answer():
    text = OfflineLLM({"answer_sentences": 1}).respond(answer_request(QUESTION))
    assert len(cited(text)) == 1


def test_notice_once_prints_once(capsys):
    with offline_notice_unsent():
        assert notice_once() is True
        assert notice_once() is False
    err = capsys.readouterr().err
    assert err.count(NOTICE) == 1 and 'name = "openai"' in err and "ollama" in err


def _bulk_requests() -> list[ChatRequest]:
    lines = [f"Gu Yao checked batch {i} of the buoys with Lianhua Castings." for i in range(12)]
    first = build_extraction_request("Gu Yao leads Project Haijia.", entity_types=["person", "project"])
    return [
        first,
        build_extraction_request("顾瑶负责海佳项目。Gu Yao works with Lianhua Castings."),
        build_gleaning_request(first, "entity<|#|>Gu Yao<|#|>person<|#|>leads"),
        build_summary_request("Gu Yao", lines, language="English", max_tokens=40),
    ]


@pytest.mark.parametrize("which", range(4), ids=["extraction", "default-types", "gleaning", "summary"])
async def test_the_worker_process_answers_as_the_rules_do_here(which):
    """Extractions and summaries run in a worker process; its answer is the
    one the same rules give in this process, under the same options."""
    request = _bulk_requests()[which]
    llm = OfflineLLM({"answer_sentences": 3})
    here = llm.completion(request)
    assert (await llm.complete(request)) == here
    assert here.text.endswith(COMPLETE_MARKER) if which < 3 else here.text
    if which == 1:
        assert "<|#|>person<|#|>" in here.text or "<|#|>organization<|#|>" in here.text, "the default types"


def test_the_worker_answers_with_the_default_options_which_shape_no_bulk_answer():
    """One adapter with the defaults answers in the worker, whatever the
    caller's options: none of them shapes an extraction or a summary."""
    from ragkit.offline import llm as offline_llm

    assert set(offline_llm.OfflineOptions.model_fields) == {"answer_sentences"}, (
        "a new option: if it shapes an extraction or a summary, send it to the worker (_complete_in_worker)")
    for request in _bulk_requests():
        assert offline_llm._complete_in_worker(request) == OfflineLLM({"answer_sentences": 1}).completion(request)
    assert offline_llm._worker_rules() is offline_llm._worker_rules()


async def test_extractions_and_summaries_run_in_the_worker_process_and_queries_do_not():
    """A query's keywords and answer never wait behind an indexing run's
    extractions: those go to the worker process, the query's to a thread."""
    import multiprocessing

    from ragkit.offline import llm as offline_llm

    offline_llm._BULK.get().shutdown(wait=True)
    offline_llm._BULK.drop()  # as in a process that has not indexed yet
    llm = OfflineLLM()
    await llm.complete(build_keywords_request(QUESTION))
    await llm.complete(answer_request(QUESTION))
    assert multiprocessing.active_children() == [], "a query started the worker process"
    await llm.complete(_bulk_requests()[0])
    assert len(multiprocessing.active_children()) == 1, "the extraction ran without the worker process"


async def test_a_subclass_that_answers_otherwise_answers_here_on_the_offline_thread():
    """A subclass's own ``respond`` (a test's double) is not the worker's: it
    runs in this process for every role, on the rules' own thread."""
    import os
    import threading

    seen = []

    class Probe(OfflineLLM):
        def respond(self, request):
            seen.append((request.role, threading.current_thread().name, os.getpid()))
            return super().respond(request)

    for request in (_bulk_requests()[0], _bulk_requests()[3], build_keywords_request(QUESTION)):
        await Probe().complete(request)
    assert [role for role, _, _ in seen] == ["extraction", "summary", "keywords"]
    assert {(name.split("_")[0], pid) for _, name, pid in seen} == {("ragkit-offline", os.getpid())}


def test_a_forked_process_gets_its_own_worker():
    """A fork of a process that used the worker (a pre-forking server) holds a
    copy of the parent's pool without its threads: its extractions must not
    wait on it forever."""
    import asyncio

    from ragkit.testing.forking import check_in_fork

    request = _bulk_requests()[0]
    expected = OfflineLLM().completion(request)
    assert asyncio.run(OfflineLLM().complete(request)) == expected  # the pool exists here now
    check_in_fork(lambda: asyncio.run(OfflineLLM().complete(request)) == expected)


def test_a_forked_process_answers_queries_on_a_thread_of_its_own():
    """The same for a query's keywords and answer, which run on the
    interactive thread: the parent used it, the child's must still run."""
    import asyncio

    from ragkit.core.prompts import build_keywords_request
    from ragkit.testing.forking import check_in_fork

    request = build_keywords_request("Who founded the publisher of Climate Dynamics?")
    expected = asyncio.run(OfflineLLM().complete(request))  # the parent's thread is started now
    check_in_fork(lambda: asyncio.run(OfflineLLM().complete(request)) == expected)


# -- summaries, rule by rule (ragkit.offline.keywords) ------------------------------------------


def test_the_statements_are_read_from_between_their_marks():
    """The block after the first "Statements:" line and before the last
    "Description:" (a statement may hold either word); "- " bullets dropped,
    lines of dashes and blanks skipped, other lines kept whole; with no marks,
    the whole prompt."""
    prompt = SUMMARY_PROMPT.format(subject="Gu Yao", language="English",
                                   statements="- first\n- Statements:\n-   padded  \n-\n- - \nXX\nplain - line\n- last")
    assert statements_of(prompt) == ["first", "Statements:", "padded", "XX", "plain - line", "last"]
    assert statements_of("Statements:\n- a\n- b\n\nDescription:") == ["a", "b"]  # a mark at the very start
    assert statements_of("Say what a Description: is.\n\nDescription: see below.\n\nStatements:\n- a\n\nDescription:") == ["a"]
    assert statements_of("- x\n- y") == ["x", "y"]


def _words(text: str) -> int:
    return len(text.split())


def test_a_summary_takes_the_richest_statements_that_fit_and_add_something():
    """Richest first; one that does not fit is skipped (a smaller one may still);
    one that adds no content word beyond those already taken is skipped; each
    costs its tokens plus one (the line break), all within max_tokens exactly."""
    def cut(text: str, tokens: int) -> str:
        return " ".join(text.split()[:tokens])

    three = ["copper silver", "gold iron", "tin zinc"]  # 3 tokens each with the line break
    assert summarise(three, 6, _words, cut) == "copper silver\ngold iron"
    assert summarise(["tin", "copper silver gold"], 4, _words, cut) == "copper silver gold"  # richest first
    assert summarise(["copper silver gold iron tin zinc", "lead nickel"], 5, _words, cut) == "lead nickel"
    covered = ["copper silver gold", "iron zinc", "copper iron", "tin"]  # the third adds nothing new
    assert summarise(covered, 50, _words, cut) == "copper silver gold\niron zinc\ntin"
    assert summarise(["copper silver gold iron"], 2, _words, cut) == "copper silver"  # none fits: the first, cut
