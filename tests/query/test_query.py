"""The query pipeline on a replay-indexed MuSiQue subset: budgets, evidence,
citations, scope, caching, streaming, every mode."""

from __future__ import annotations

import json

import pytest

from ragkit.core.extraction import ChunkExtraction
from ragkit.core.tokens import request_tokens
from ragkit.errors import InvalidValueError
from ragkit.query.answer import build_answer_request
from ragkit.query.context import CHUNK_HEADER, ENTITY_HEADER, REFERENCE_HEADER, RELATION_HEADER
from ragkit.query.counting import TokenCounts
from ragkit.schema import QueryParam
from ragkit.testing import ScriptedLLM
from ragkit.tokenizer import TiktokenTokenizer

from .conftest import make_rag, supporting_titles

GRAPH_MODES = ["local", "global", "hybrid", "mix", "ppr"]
CONTEXT_MODES = [*GRAPH_MODES, "naive"]
BUDGETS = {
    "default": {},
    "tight": {"max_entity_tokens": 600, "max_relation_tokens": 700, "max_total_tokens": 4000},
    "tiny": {"max_entity_tokens": 150, "max_relation_tokens": 150, "max_total_tokens": 1800},
}


class CharTokenizer:
    """One token per character: reference numbers of two digits are two
    tokens, and a token boundary falls everywhere (``splits_between``)."""

    name = "test-chars"

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens) -> str:
        return "".join(map(chr, tokens))

    def count(self, text: str) -> int:
        return len(text)

    def splits_between(self, before: str, after: str) -> bool:
        return True


class Unpromising:
    """A real BPE tokenizer (o200k_base) that promises no token boundary, like
    any third-party tokenizer: contexts are then counted as whole texts."""

    def __init__(self) -> None:
        self.inner = TiktokenTokenizer({"encoding": "o200k_base"})
        self.name = "test-o200k-no-boundaries"

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, tokens) -> str:
        return self.inner.decode(tokens)

    def count(self, text: str) -> int:
        return self.inner.count(text)


TOKENIZERS = {
    "cl100k": lambda: None,  # the default
    "o200k": lambda: TiktokenTokenizer({"encoding": "o200k_base"}),
    "chars": CharTokenizer,
    "unpromising": Unpromising,
}


def sections(context: str) -> dict[str, str]:
    """The context's sections by header (a JSON line never holds a raw line break)."""
    return {text.split("\n", 1)[0]: text for text in context.split("\n\n")} if context else {}


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("mode", CONTEXT_MODES)
async def test_context_is_counted_exactly_and_fits_every_budget(indexed, questions, mode, budget, tokenizer):
    """Troubleshoot a count mismatch with ``TokenCounts.groups`` on the context's
    pieces: a boundary was assumed where the tokenizer merges across it."""
    param = QueryParam(mode=mode, only_need_context=True, **BUDGETS[budget])
    async with make_rag(indexed, tokenizer=TOKENIZERS[tokenizer]()) as rag:
        count = rag.tokenizer.count
        for q in questions:
            result = await rag.aquery(q["question"], param)
            entity_lines = [line for line in result.context.splitlines() if line.startswith('{"entity":')]
            relation_lines = [line for line in result.context.splitlines() if line.startswith('{"entity1"')]
            assert len(entity_lines) == len(result.entities) and len(relation_lines) == len(result.relations)
            tokens = result.metadata["tokens"]
            shown = sections(result.context)
            assert tokens["context"] == count(result.context)
            for name, header in [("entities", ENTITY_HEADER), ("relations", RELATION_HEADER),
                                 ("chunks", CHUNK_HEADER), ("references", REFERENCE_HEADER)]:
                assert tokens[name] == count(shown.get(header, "")), name
            assert tokens["entities"] <= param.max_entity_tokens
            assert tokens["relations"] <= param.max_relation_tokens
            # The prompt really sent: rebuild it and count it.
            request = build_answer_request(q["question"], result.context, history=[],
                                           response_type=param.response_type, language=param.language)
            assert tokens["prompt_total"] == request_tokens(rag.tokenizer, request) <= param.max_total_tokens
            assert result.chunks, "every question should find some source chunk"
            stored = await rag.stores.chunks.get_many([c["id"] for c in result.chunks])
            for chunk, record in zip(result.chunks, stored):
                assert record is not None and record["doc_id"] == chunk["doc_id"]
            by_number = {r.number: r for r in result.sources}
            assert sorted(by_number) == list(range(1, len(by_number) + 1))
            for chunk in result.chunks:
                ref = by_number[chunk["reference"]]
                assert ref.doc_id == chunk["doc_id"] and chunk["id"] in ref.chunk_ids


async def test_the_prompt_shown_is_the_prompt_counted(indexed, questions):
    param = QueryParam(mode="mix", only_need_context=True)
    async with make_rag(indexed) as rag:
        for q in questions[:3]:
            result = await rag.aquery(q["question"], param)
            prompt = (await rag.aquery(q["question"], param.model_copy(update={
                "only_need_context": False, "only_need_prompt": True}))).prompt
            request = build_answer_request(q["question"], result.context, history=[],
                                           response_type=param.response_type, language=param.language)
            assert prompt == f"[system]\n{request.system}\n\n[user]\n{q['question']}"


@pytest.mark.parametrize("mode", GRAPH_MODES)
async def test_no_kept_claim_lacks_a_kept_source_chunk(indexed, questions, mode):
    for budget in BUDGETS.values():
        param = QueryParam(mode=mode, only_need_context=True, **budget)
        async with make_rag(indexed) as rag:
            for q in questions:
                result = await rag.aquery(q["question"], param)
                kept = {c["id"] for c in result.chunks}
                for item in [*result.entities, *result.relations]:
                    assert kept & set(item["source_ids"]), f"{item['key']} kept without evidence"
                lines = [json.loads(x) for x in result.context.splitlines() if x.startswith('{"entity')]
                numbers = {r.number for r in result.sources}
                assert all(set(line.get("refs", [])) <= numbers and line.get("refs") for line in lines)


@pytest.mark.parametrize("mode", CONTEXT_MODES)
async def test_every_mode_finds_supporting_passages_for_most_questions(indexed, questions, mode):
    found = 0
    async with make_rag(indexed) as rag:
        for q in questions:
            result = await rag.aquery(q["question"], mode=mode, only_need_context=True)
            titles = {c["content"].split("\n", 1)[0] for c in result.chunks}
            found += bool(titles & supporting_titles(q))
    assert found > len(questions) / 2, f"{mode}: {found}/{len(questions)}"


@pytest.mark.parametrize("mode", CONTEXT_MODES)
async def test_a_query_embeds_everything_it_searches_with_in_one_call(indexed, questions, mode):
    """A model's fixed cost per call (a forward pass, an HTTP round trip) is paid once per query."""
    async with make_rag(indexed) as rag:
        for q in questions[:3]:
            before = rag.embedder.calls
            await rag.aquery(q["question"], mode=mode, only_need_context=True)
            assert rag.embedder.calls - before == 1


async def test_chunks_of_one_document_share_its_reference(tmp_path):
    text = "\n\n".join(
        f"Section {i}. The Haijia project buys control boards from Yingchuan, batch {i}." * 6 for i in range(6)
    )
    scripted = ScriptedLLM(script=lambda r: (
        "entity<|#|>Haijia<|#|>project<|#|>Haijia buys boards.\n"
        "entity<|#|>Yingchuan<|#|>organization<|#|>Yingchuan sells boards.\n"
        "relation<|#|>Haijia<|#|>Yingchuan<|#|>supply<|#|>Haijia buys control boards from Yingchuan.\n<|COMPLETE|>"
        if r.role == "extraction" else '{"high_level_keywords": ["supply"], "low_level_keywords": ["Haijia"]}'))
    async with make_rag(tmp_path, llm=scripted) as rag:
        rag.index_config = rag.index_config.model_copy(update={"chunk_size": 60, "chunk_overlap": 0})
        await rag.ainsert([text, "Qinghe started a backup-supplier review."])
        result = await rag.aquery("Who supplies Haijia?", mode="mix", only_need_context=True)
    multi = [r for r in result.sources if len(r.chunk_ids) > 1]
    assert multi, "the long document should contribute several chunks"
    for chunk in result.chunks:
        assert chunk["reference"] == next(r.number for r in result.sources if r.doc_id == chunk["doc_id"])


async def test_scoped_query_never_shows_other_documents(indexed, questions):
    async with make_rag(indexed) as rag:
        everything = [r async for r in _processed(rag)]
        scope = [r.id for r in everything[::4]]
        allowed_chunks = {c for r in everything if r.id in scope for c in r.chunk_ids}
        extractions = [
            ChunkExtraction.model_validate(x)
            for x in await rag.stores.extractions.get_many(sorted(allowed_chunks)) if x
        ]
        statements = {line for ex in extractions for item in [*ex.entities, *ex.relations]
                      for line in item.description.splitlines()}
        for q in questions:
            for mode in CONTEXT_MODES:
                result = await rag.aquery(q["question"], mode=mode, only_need_context=True, doc_ids=scope)
                assert {c["doc_id"] for c in result.chunks} <= set(scope)
                for item in [*result.entities, *result.relations]:
                    assert set(item["source_ids"]) <= allowed_chunks
                    for line in item["description"].splitlines():
                        assert line in statements, f"{line!r} comes from outside the scope"


async def test_scope_by_document_metadata(indexed, questions):
    async with make_rag(indexed) as rag:
        group = {r.id for r in [r async for r in _processed(rag)] if r.metadata.get("group") == 1}
        result = await rag.aquery(questions[0]["question"], mode="mix", only_need_context=True,
                                  doc_filter={"group": 1})
        assert result.chunks and {c["doc_id"] for c in result.chunks} <= group
        with pytest.raises(InvalidValueError, match="document filter"):
            await rag.aquery("x", only_need_context=True, doc_filter={"group": {"$gt": 1}})


async def test_answers_are_cached_by_every_parameter_and_never_with_history(workdir, questions):
    question = questions[0]["question"]
    async with make_rag(workdir) as rag:
        first = await rag.aquery(question, mode="mix")
        assert first.answer and "answer" not in first.metadata["cache_hits"]
        again = await rag.aquery(question, mode="mix")
        assert again.answer == first.answer and set(again.metadata["cache_hits"]) == {"keywords", "answer"}
        for change in ({"mode": "local"}, {"top_k": 5}, {"response_type": "One sentence"},
                       {"user_prompt": "Be brief."}, {"max_total_tokens": 5000}, {"chunk_top_k": 3},
                       {"doc_ids": [first.sources[0].doc_id]}, {"language": "French"}):
            changed = await rag.aquery(question, **{"mode": "mix", **change})
            assert "answer" not in changed.metadata["cache_hits"], change
        calls = rag.llm.stats.calls["answer"]
        history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
        await rag.aquery(question, mode="mix", history=history)
        await rag.aquery(question, mode="mix", history=history)
        assert rag.llm.stats.calls["answer"] == calls + 2


async def test_history_reaches_the_answer_call_only(workdir, questions):
    llm = ScriptedLLM(script=lambda r: '{"high_level_keywords": ["a"], "low_level_keywords": ["b"]}'
                      if r.role == "keywords" else "An answer [1].")
    history = [{"role": "user", "content": "Earlier question"}, {"role": "assistant", "content": "Earlier answer"}]
    async with make_rag(workdir, llm=llm) as rag:
        await rag.aquery(questions[0]["question"], mode="mix", history=history)
    roles = {r.role: r for r in llm.requests}
    assert roles["keywords"].history == ()
    assert [m.content for m in roles["answer"].history] == ["Earlier question", "Earlier answer"]
    with pytest.raises(InvalidValueError, match="history"):
        async with make_rag(workdir, llm=llm) as rag:
            await rag.aquery("q", history=[{"role": "robot", "content": "x"}])


@pytest.mark.parametrize("mode", [*CONTEXT_MODES, "bypass"])
async def test_streaming_yields_the_same_text_as_non_streaming(workdir, questions, mode):
    question = questions[1]["question"]
    async with make_rag(workdir) as rag:
        whole = await rag.aquery(question, mode=mode)
        streamed = await rag.aquery(question, mode=mode, stream=True)
        assert streamed.answer is None
        pieces = [piece async for piece in streamed.stream]
        assert len(pieces) >= 1 and "".join(pieces) == whole.answer == streamed.answer
        assert "answer" not in streamed.metadata["cache_hits"]


async def test_user_keywords_skip_the_keyword_call_and_bypass_skips_retrieval(workdir, questions):
    llm = ScriptedLLM(script=lambda r: "plain answer")
    async with make_rag(workdir, llm=llm) as rag:
        result = await rag.aquery(questions[0]["question"], mode="hybrid", only_need_context=True,
                                  high_level_keywords=["journal"], low_level_keywords=["American Psychological Association"])
        assert llm.requests == [] and result.metadata["keywords"]["source"] == "user"
        assert result.entities
        bypass = await rag.aquery("What is 2 + 2?", mode="bypass")
    assert bypass.answer == "plain answer" and bypass.context == "" and bypass.chunks == []
    assert [r.role for r in llm.requests] == ["answer"]


async def test_no_keywords_falls_back_to_the_question(workdir):
    llm = ScriptedLLM(script=lambda r: "Sorry, I cannot produce JSON." if r.role == "keywords" else "ok")
    async with make_rag(workdir, llm=llm) as rag:
        result = await rag.aquery("Who founded the American Psychological Association?", mode="local",
                                  only_need_context=True)
    keywords = result.metadata["keywords"]
    assert keywords["source"] == "question" and keywords["warnings"]
    assert keywords["low_level"] == ["Who founded the American Psychological Association?"]
    assert result.entities


async def test_clear_errors_for_bad_queries(workdir):
    async with make_rag(workdir) as rag:
        with pytest.raises(InvalidValueError, match="question is empty"):
            await rag.aquery("   ")
        with pytest.raises(InvalidValueError, match="query parameters: mode"):
            await rag.aquery("What?", mode="telepathy")
        with pytest.raises(InvalidValueError, match="raise max_total_tokens"):
            await rag.aquery("What?", max_total_tokens=50, only_need_context=True)


def test_sync_query_wrapper(workdir, questions):
    result = make_rag(workdir).query(questions[0]["question"], mode="naive")
    assert result.answer and result.sources


async def _processed(rag):
    cursor = None
    while True:
        page = await rag.stores.doc_status.list_page(None, 500, cursor)
        for record in page.items:
            yield record
        if page.next_cursor is None:
            break
        cursor = page.next_cursor


class _Recording:
    """A real tokenizer, recording what it is asked to count."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.texts = inner, inner.name, []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return self.inner.count(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


async def test_context_pieces_are_encoded_once_per_tokenizer(workdir, questions):
    """Token counts live with the query side (``TokenCounts``, per tokenizer
    object), not in the stores: asking again encodes nothing, and other
    questions encode only pieces no query showed before (chunk text and
    descriptions are shared; a line's references are counted apart)."""
    param = QueryParam(mode="mix", only_need_context=True)
    recording = _Recording(TiktokenTokenizer())
    async with make_rag(workdir, tokenizer=recording) as rag:
        first = await rag.aquery(questions[0]["question"], param)
        encoded = len(recording.texts)
        assert encoded and TokenCounts.of(recording).encoded == encoded
        again = await rag.aquery(questions[0]["question"], param)
        assert again.context == first.context and again.metadata["tokens"] == first.metadata["tokens"]
        assert len(recording.texts) == encoded, recording.texts[encoded:]
        for q in questions[1:4]:
            await rag.aquery(q["question"], param)
        assert len(recording.texts) == len(set(recording.texts)), "a piece was encoded twice"
        # Each chunk's text is encoded once whatever reference number it shows.
        chunk_texts = [t for t in recording.texts if t.startswith(' "content": ')]
        assert len(chunk_texts) == len({t.rstrip("\n") for t in chunk_texts})
    other = TiktokenTokenizer({"encoding": "o200k_base"})
    assert TokenCounts.of(other) is TokenCounts.of(other) is not TokenCounts.of(recording)


def test_token_counts_keep_the_most_recently_used():
    tok = _Recording(TiktokenTokenizer())
    counts = TokenCounts(tok, max_chars=4)
    for text in ["aa", "b", "c", "aa", "d", "b", "aa"]:
        assert counts.count(text) == tok.inner.count(text)
    # "d" pushed out "b", the least recently used; "b" pushed out "c"; "aa" stayed.
    assert tok.texts == ["aa", "b", "c", "d", "b"] and counts.chars == 4
    counts.count("eeeee")
    assert counts.chars == 5 and counts.count("eeeee") and tok.texts[-1] == "eeeee"  # a long one is kept alone


def test_lines_are_json_of_their_rows_and_cut_where_the_numbers_start():
    from ragkit.query.items import ChunkItem, EntityItem, RelationItem
    from ragkit.query.lines import chunk_line_parts, chunk_row, graph_line_parts, graph_row, render

    entity = EntityItem({"name": 'A "quoted" name', "type": "person",
                         "description": 'Line one.\nLine ü, "refs": [9]} two.'}, "s", key="a")
    relation = RelationItem({"source": "A", "target": "B", "keywords": "k", "description": "d}"}, "s", key=("a", "b"))
    for item in (entity, relation):
        heads = set()
        for refs in ([], [3], [1, 2, 10]):
            line = render(graph_row(item, refs))
            assert json.loads(line) == graph_row(item, refs) and "\n" not in line
            head, tail = graph_line_parts(line)
            assert head + tail == line and json.loads("{" + tail[1:]) == {"refs": refs}
            heads.add(head)
        assert len(heads) == 1, "the part before the refs does not depend on them"
    tricky = {"a": 'quote " backslash \\ tab \t nul \x00 é 漢 🙂 \u2028 \ud800', "n": [1, -2, 10**20], "e": ""}
    assert render(tricky) == json.dumps(tricky, ensure_ascii=False)
    chunk = ChunkItem("c", '{"ref": 0, "content": 1}, "x"\n', "d", None, "chunk_vectors")
    rests = set()
    for n in (0, 1, 9, 123):
        line = render(chunk_row(chunk, n))
        assert json.loads(line) == {"ref": n, "content": chunk.content}
        head, rest = chunk_line_parts(line)
        assert head + rest == line and head == f'{{"ref": {n},'
        rests.add(rest)
    assert len(rests) == 1
