"""The replay LLM answers extraction prompts with the canonical rendering of the
recorded MuSiQue extractions (../shared/data/musique/README.md).

Skipped when the data set is missing; set RAGKIT_MUSIQUE_DIR to run. If a count
below fails, the recording changed or a rendering or parsing rule did: the
module docstrings of ``ragkit.testing.replay`` and ``ragkit.pipeline.parse``
state the rules, and the expected values here are derived from the README.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from ragkit.core.prompts import COMPLETE_MARKER, build_extraction_request, build_gleaning_request
from ragkit.errors import ConfigError
from ragkit.ids import normalize_name
from ragkit.pipeline.parse import parse_extraction
from ragkit.protocols.models import LLM, ChatRequest
from ragkit.schema import Entity, Relation
from ragkit.testing import replay
from ragkit.testing.musique_keywords import question_keywords
from ragkit.testing.replay import OPENIE_FILE, ReplayLLM, _recording, load_musique, musique_dir

# The data ships beside the repository (../shared); a missing copy is an error
# that names RAGKIT_MUSIQUE_DIR, never a silent skip.
DATA = musique_dir()


@pytest.fixture(scope="module")
def docs():
    return load_musique(DATA)[1]


@pytest.fixture
def llm():
    # Read afresh: the recording is cached per process, so a change to how it
    # is read would otherwise go unseen by every test after the first.
    _recording.cache_clear()
    return ReplayLLM()


def expected(doc) -> tuple[list[Entity], list[Relation]]:
    """The README's rendering, then the parser's rules: exact duplicate rows kept
    once, self-loops dropped."""
    triples = [t for t in doc["extracted_triples"] if len(t) == 3]
    names: list[str] = []
    for name in [*doc["extracted_entities"], *(x for s, _, o in triples for x in (s, o))]:
        if name not in names:
            names.append(name)
    entities = [
        Entity(
            name=name,
            type="entity",
            description=" ".join(f"{s} {r} {o}." for s, r, o in triples if name in (s, o))
            or f"{name} is mentioned in the passage about {doc['title']}.",
        )
        for name in names
    ]
    relations: list[Relation] = []
    for s, r, o in triples:
        rel = Relation(source=s, target=o, keywords=r, description=f"{s} {r} {o}.", strength=1.0)
        if rel not in relations and normalize_name(s) != normalize_name(o):
            relations.append(rel)
    return entities, relations


async def extract(llm: ReplayLLM, chunk: str) -> str:
    return (await llm.complete(build_extraction_request(chunk))).text


def test_is_an_llm(llm):
    assert isinstance(llm, LLM)
    assert llm.model_id.startswith("replay:") and ReplayLLM.name == "replay"
    assert ReplayLLM().model_id == llm.model_id


def test_data_set_counts(docs):
    corpus, openie, questions = load_musique(DATA)
    assert (len(corpus), len(openie), len(questions)) == (1890, 1890, 50)
    triples = [t for d in docs for t in d["extracted_triples"]]
    well_formed = [t for t in triples if len(t) == 3]
    assert (len(triples), len(well_formed)) == (17_419, 17_234)


async def test_golden_answer_for_one_passage(llm, docs):
    text = await extract(llm, docs[0]["passage"])
    lines = text.splitlines()
    title = "Journal of Mathematical Physics"
    assert lines[0] == f"entity<|#|>1963<|#|>entity<|#|>1963 is mentioned in the passage about {title}."
    assert lines[2] == (
        "entity<|#|>American Institute of Physics<|#|>entity<|#|>"
        "Journal of Mathematical Physics published by American Institute of Physics."
    )
    assert lines[9] == (
        "relation<|#|>Journal of Mathematical Physics<|#|>American Institute of Physics<|#|>published by<|#|>"
        "Journal of Mathematical Physics published by American Institute of Physics.<|#|>1.0"
    )
    assert lines[-1] == COMPLETE_MARKER
    # 7 recorded entities plus the 2 objects that are not among them; 6 triples.
    assert len(lines) == 9 + 6 + 1


async def test_every_passage_replays_its_canonical_rendering(llm, docs):
    totals = {"relations": 0, "entities": 0, "dropped": 0}
    for doc in docs:
        text = await extract(llm, doc["passage"])
        result = parse_extraction(text)
        assert result.complete and result.entities, doc["title"]
        assert (result.entities, result.relations) == expected(doc), doc["title"]
        totals["relations"] += len(result.relations)
        totals["entities"] += len(result.entities)
        totals["dropped"] += result.dropped
    assert llm.calls == len(docs) == 1890 and llm.unknown_prompts == 0
    # 17,234 well-formed triples, less 30 exact repeats within a passage and 20
    # self-loops (subject == object) that the parser drops.
    assert totals == {"relations": 17_184, "entities": 25_559, "dropped": 20}


async def test_whitespace_changes_still_find_the_passage(llm, docs):
    """The whole passage, whitespace aside, gets the whole record: names that
    do not occur in it word for word too (a fragment would lose them)."""
    from ragkit.testing.replay import canonical_extraction

    doc = next(d for d in docs if canonical_extraction(d, d["passage"]) != canonical_extraction(d))
    variant = "  " + doc["passage"].replace("\n", "\n\n").replace(" ", "  ") + "\n"
    assert await extract(llm, variant) == await extract(llm, doc["passage"])


async def test_fragment_gets_what_occurs_in_it(llm, docs):
    passage = docs[0]["passage"]
    cut = passage.index(" The journal was first")
    first = parse_extraction(await extract(llm, passage[:cut]))
    assert [r.keywords for r in first.relations] == ["published by"]
    assert [e.name for e in first.entities] == ["American Institute of Physics", "Journal of Mathematical Physics"]
    assert first.entities[1].description == (
        "Journal of Mathematical Physics published by American Institute of Physics."
    )
    second = parse_extraction(await extract(llm, passage[cut:]))
    # The journal's full name is not in this half, so its triples go; "1.355 in
    # 2018" paraphrases the text, so it goes too.
    assert [(r.source, r.target) for r in second.relations] == [("Jan Philip Solovej", "University of Copenhagen")]
    assert {e.name for e in second.entities} == {
        "1963", "2018 Impact Factor", "Jan Philip Solovej", "January 1960", "University of Copenhagen",
        "monthly publication in 1963",
    }
    assert llm.unknown_prompts == 0


async def test_fragments_never_invent(llm, docs):
    for doc in docs[::97]:
        passage = doc["passage"]
        middle = passage.find(" ", len(passage) // 2)
        whole = parse_extraction(await extract(llm, passage))
        for half in (passage[:middle], passage[middle:]):
            result = parse_extraction(await extract(llm, half))
            folded = " ".join(half.split()).casefold()
            for rel in result.relations:
                assert rel in whole.relations
                assert rel.source.casefold() in folded and rel.target.casefold() in folded
            assert {e.name for e in result.entities} <= {e.name for e in whole.entities}
    assert llm.unknown_prompts == 0


async def test_gleaning_gets_nothing_more(llm, docs):
    first = build_extraction_request(docs[0]["passage"])
    answer = await extract(llm, docs[0]["passage"])
    completion = await llm.complete(build_gleaning_request(first, answer))
    assert completion.text == COMPLETE_MARKER
    assert (llm.calls, llm.gleanings, llm.unknown_prompts) == (2, 1, 0)


async def test_unknown_prompts_are_counted(llm):
    assert (await llm.complete(ChatRequest(prompt="What is the capital of France?"))).text == COMPLETE_MARKER
    assert await extract(llm, "a chunk that no recorded passage contains, zq9") == COMPLETE_MARKER
    assert await extract(llm, "   ") == COMPLETE_MARKER
    assert (llm.calls, llm.unknown_prompts) == (3, 3)


async def test_stream_concatenates_to_complete(docs):
    llm = ReplayLLM({"chunk_size": 5})
    request = build_extraction_request(docs[3]["passage"])
    pieces = [piece async for piece in llm.stream(request)]
    assert len(pieces) > 1 and "".join(pieces) == (await llm.complete(request)).text


async def test_latency_and_jitter_are_deterministic(docs):
    """Each call sleeps ``latency`` plus the share of ``jitter`` the prompt's
    digest gives (its first 32 bits over 2**32 - 1): the same every run, and
    spread over the whole range by different prompts."""
    from ragkit.ids import digest

    llm = ReplayLLM({"latency": 0.02, "jitter": 0.02})
    request = build_extraction_request(docs[0]["passage"])
    share = int(digest(request.prompt)[:8], 16) / 0xFFFFFFFF
    assert llm.delay(request) == 0.02 + 0.02 * share
    assert ReplayLLM({"latency": 0.5}).delay(request) == 0.5 and ReplayLLM().delay(request) == 0.0
    delays = [ReplayLLM({"jitter": 1.0}).delay(build_extraction_request(d["passage"])) for d in docs[:200]]
    assert all(0.0 <= d <= 1.0 for d in delays) and min(delays) < 0.05 and max(delays) > 0.95
    start = time.perf_counter()
    await asyncio.gather(*(llm.complete(request) for _ in range(5)))
    assert llm.delay(request) <= time.perf_counter() - start < 1.0


def test_path_option_takes_the_file_or_its_folder():
    assert ReplayLLM({"path": str(DATA)}).model_id == ReplayLLM({"path": str(DATA / OPENIE_FILE)}).model_id
    with pytest.raises(ConfigError, match="RAGKIT_MUSIQUE_DIR"):
        ReplayLLM({"path": "/nonexistent/openie.json"})
    with pytest.raises(ConfigError):
        ReplayLLM({"latency": -1})


def test_musique_dir_honours_the_environment(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("RAGKIT_MUSIQUE_DIR", str(DATA))
    assert musique_dir() == DATA
    monkeypatch.setenv("RAGKIT_MUSIQUE_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="RAGKIT_MUSIQUE_DIR"):
        musique_dir()
    with pytest.raises(ConfigError, match="RAGKIT_MUSIQUE_DIR"):
        load_musique(tmp_path)


def test_musique_dir_is_found_from_elsewhere(monkeypatch, tmp_path: Path):
    monkeypatch.delenv("RAGKIT_MUSIQUE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert (musique_dir() / OPENIE_FILE).is_file()


async def test_each_role_gets_its_deterministic_answer(llm, tmp_path: Path):
    """Summaries are the statements themselves, alias checks link nothing, answers
    quote the first sentence of the context row sharing most words with the
    question, keywords apply the data set's rule; each is counted, and the
    call log has a start and an end line per call."""
    from ragkit.core.prompts import build_aliases_request, build_keywords_request, build_summary_request
    from ragkit.query.answer import build_answer_request

    log = tmp_path / "calls.log"
    llm = ReplayLLM({"call_log": str(log)})
    summary = build_summary_request("Gu Yao", ["Gu Yao leads it.", "Description: she lives in Ningbo.",
                                               "Statements: two."], language="English", max_tokens=100)
    assert (await llm.complete(summary)).text == "Gu Yao leads it. Description: she lives in Ningbo. Statements: two."
    assert (await llm.complete(build_aliases_request([("A", "B")]))).text == '{"same": []}'
    context = "\n".join([
        "-----Source chunks-----",
        json.dumps({"ref": 3, "content": "The harbour opened in 1901. It closed later."}),
        "not a row",
        '{"ref": broken json',
        json.dumps({"ref": 7, "content": "Gu Yao leads Project Haijia in Ningbo. She joined in 2024."}),
        json.dumps({"ref": 9, "content": "Ningbo is a port."}),
    ])
    question = "Who leads Project Haijia in Ningbo?"
    answer = build_answer_request(question, context, history=[], response_type="Short", language="English")
    completion = await llm.complete(answer)
    assert completion.text == "Gu Yao leads Project Haijia in Ningbo. [7]"
    empty = build_answer_request(question, "-----Source chunks-----\nnothing", history=[], response_type="Short",
                                 language="English")
    assert (await llm.complete(empty)).text == "The context holds nothing to answer from."
    asked = "Where was the Journal of Mathematical Physics first published?"
    keywords = json.loads((await llm.complete(build_keywords_request(asked))).text)
    high, low = question_keywords(asked, llm.recording.entity_names())
    assert keywords == {"high_level_keywords": high, "low_level_keywords": low}
    assert "Journal of Mathematical Physics" in low
    assert (llm.calls, llm.summaries, llm.alias_checks, llm.unknown_prompts) == (5, 1, 1, 0)
    await llm.complete(summary)
    await llm.complete(build_aliases_request([("A", "B")]))
    glean = build_gleaning_request(build_extraction_request("a chunk"), COMPLETE_MARKER)
    await llm.complete(glean)
    await llm.complete(build_gleaning_request(glean, COMPLETE_MARKER))
    assert (llm.calls, llm.summaries, llm.alias_checks, llm.gleanings) == (9, 2, 2, 2)
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (6, 8)  # words of prompt and text
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [(line[0], line[2]) for line in lines[:4]] == [("start", "summary"), ("end", "summary"),
                                                           ("start", "aliases"), ("end", "aliases")]
    assert len(lines) == 18 and all(line[1] == str(os.getpid()) for line in lines)
    assert lines[0][3] == summary.cache_key(llm.model_id) and float(lines[1][4]) >= float(lines[0][4])


async def test_ties_go_to_the_first_context_row(llm):
    from ragkit.query.answer import build_answer_request

    rows = '\n'.join(['{"ref": 2, "content": "Alpha beta. More."}', '{"ref": 5, "content": "Alpha beta gamma."}'])
    request = build_answer_request("alpha beta?", rows, history=[], response_type="Short", language="English")
    assert (await llm.complete(request)).text == "Alpha beta. [2]"


def test_load_musique_reads_the_folder_it_is_given(monkeypatch, tmp_path: Path):
    for name, data in ((replay.CORPUS_FILE, [{"title": "t"}]), (OPENIE_FILE, {"docs": [{"passage": "p"}]}),
                       (replay.QUESTIONS_FILE, [{"id": "q"}])):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    assert load_musique(tmp_path) == ([{"title": "t"}], [{"passage": "p"}], [{"id": "q"}])
    monkeypatch.setenv("RAGKIT_MUSIQUE_DIR", str(tmp_path))
    assert load_musique() == load_musique(tmp_path)


def test_missing_data_names_the_folders_tried(monkeypatch, tmp_path: Path):
    monkeypatch.delenv("RAGKIT_MUSIQUE_DIR", raising=False)
    (tmp_path / "repo").mkdir()
    monkeypatch.setattr(replay, "_REPO_ROOT", tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo")  # the same folders again: each is named once
    with pytest.raises(ConfigError) as caught:
        musique_dir()
    folders = [tmp_path / "repo", tmp_path, tmp_path.parent]
    assert str(caught.value).startswith(
        f"MuSiQue data not found (no {OPENIE_FILE} in " + ", ".join(str(f / "shared/data/musique") for f in folders)
        + ", ...): set RAGKIT_MUSIQUE_DIR"
    )


async def test_an_answer_quotes_the_row_sharing_most_words_whatever_its_ref(llm):
    """Overlaps decide, not refs (here in the opposite order); the first
    sentence is quoted with its newlines made spaces and its own full stop
    replaced by the citation's; a row without content quotes nothing."""
    from ragkit.query.answer import build_answer_request

    def ask(question: str, *rows: dict) -> ChatRequest:
        context = "\n".join(json.dumps(row) for row in rows)
        return build_answer_request(question, context, history=[], response_type="Short", language="English")

    rows = [{"ref": 9, "content": "Alpha only."}, {"ref": 1, "content": "Alpha beta gamma. Then."},
            {"ref": 4, "content": "Alpha beta. Then."}]
    assert (await llm.complete(ask("alpha beta gamma?", *rows))).text == "Alpha beta gamma. [1]"
    lines = {"ref": 2, "content": "Malcolm X\nspoke in\nHarlem."}
    assert (await llm.complete(ask("who spoke in Harlem?", lines))).text == "Malcolm X spoke in Harlem. [2]"
    x_last = {"ref": 3, "content": "They met Malcolm X. Then they left."}
    assert (await llm.complete(ask("whom did they meet?", x_last))).text == "They met Malcolm X. [3]"
    assert (await llm.complete(ask("anything?", {"ref": 5}))).text == ". [5]"


def test_model_id_names_the_recording_it_replays(llm):
    from ragkit.ids import digest

    text = (DATA / OPENIE_FILE).read_bytes().decode("utf-8", "replace")
    assert llm.model_id == f"replay:{digest(text)[:12]}"


def test_a_fragment_matches_whole_words_runs_not_what_joining_them_makes():
    """Whitespace runs count as one space on both sides, and nothing else
    changes: a name occurs in a chunk only as its own letters."""
    doc = {"title": "T", "passage": "a b", "extracted_entities": ["x", "a b", "a  b c"], "extracted_triples": []}
    entities, _ = replay.canonical_extraction(doc, "a \n  b")
    assert [e.name for e in entities] == ["a b"]
