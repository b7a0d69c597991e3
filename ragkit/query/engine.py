"""The read side: a question in, an answer with references out.

keywords -> search (the mode's) -> supporting chunks -> budgeted context -> answer.
Each stage is its own module; this one only orders them, times them and
assembles the ``QueryResult``. What a mode searches and needs is the mode
class's own business (``query/modes.py``), looked up in the plugin registry.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import contextmanager

import numpy as np

from ragkit import ids
from ragkit.access import Principal
from ragkit.core.llm_cache import CachedLLM, LLMStats, counting
from ragkit.core.scope import Restrictor, Scope, resolve_scope
from ragkit.core.stores import Stores
from ragkit.core.tokens import request_tokens
from ragkit.errors import ConfigError, InvalidValueError
from ragkit.plugins import get_registry
from ragkit.protocols import ChatRequest, Embedder, Reranker, Tokenizer
from ragkit.query.answer import build_answer_request, build_bypass_request
from ragkit.query.citation import citation
from ragkit.query.cited import Citations, cited
from ragkit.query.context import Budget, Context, build_context, rank_graph_chunks
from ragkit.query.counting import TokenCounts
from ragkit.query.items import ChunkItem, fuse
from ragkit.query.keywords import Keywords, extract_keywords
from ragkit.query.modes import Found, QueryMode, chunk_items
from ragkit.query.search import Searcher
from ragkit.schema import QueryParam, QueryResult, Reference


class Querier:
    def __init__(
        self,
        stores: Stores,
        llm: CachedLLM | None,
        embedder: Embedder,
        tokenizer: Tokenizer,
        reranker: Reranker | None = None,
    ) -> None:
        self.stores = stores
        self.llm = llm
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.reranker = reranker
        self.counts = TokenCounts.of(tokenizer)  # kept across this querier's queries

    async def query(
        self, question: str, param: QueryParam | None = None, *, principal: Principal | None = None
    ) -> QueryResult:
        """With ``principal``: every stage sees only the documents it may read
        (``ragkit.access``), narrowed by ``doc_ids``/``doc_filter``."""
        param = param or QueryParam()
        if not question.strip():
            raise InvalidValueError("the question is empty; ask something")
        mode = self._mode(param)
        run = _Run(param)
        scope = await resolve_scope(self.stores, param.doc_ids, param.doc_filter, principal)
        run.cache_for(scope, principal)
        if not mode.retrieves:
            return await self._answer(question, param, run, build_bypass_request(
                question, history=param.history, response_type=param.response_type, language=param.language
            ), context=None)
        keywords = Keywords()
        if mode.extracts_keywords:
            with run.stage("keywords"):
                keywords = await self._keywords(question, param, run)
            run.meta.update(keywords=keywords.model_dump())
        with run.stage("search"):
            searcher = self._searcher(scope)
            found = await self._search(mode, question, param, keywords, searcher)
        with run.stage("chunks"):
            candidates = await self._candidates(mode, question, param, found, searcher)
        with run.stage("context"):
            budget = self._budget(question, param)
            # Counting and cutting is tens of milliseconds of pure work on a large
            # context: in a worker thread, the loop's other requests go on (the
            # items are this query's own; the counts' cache takes a lock).
            context = await asyncio.to_thread(
                build_context, found.entities, found.relations, candidates, self.tokenizer, budget, self.counts
            )
        request = build_answer_request(
            question, context.text, history=param.history, response_type=param.response_type,
            language=param.language, user_instructions=param.user_prompt,
        )
        run.meta.update(tokens=_tokens(context, self.counts, question))
        run.meta.update(dropped_unsupported=context.dropped_unsupported, truncated=context.truncated,
                        chunks_left_out=len(candidates) - len(context.chunks))
        return await self._answer(question, param, run, request, context)

    # -- stages ----------------------------------------------------------------

    def _mode(self, param: QueryParam) -> QueryMode:
        """A fresh instance of the registered mode (QueryParam checked the name)."""
        return get_registry().get("query_mode", param.mode)()

    async def _keywords(self, question: str, param: QueryParam, run: _Run) -> Keywords:
        with counting(LLMStats()) as usage:  # this query's hits, not a concurrent one's
            keywords = await extract_keywords(
                question, high=param.high_level_keywords, low=param.low_level_keywords,
                llm=self.llm, language=param.language, cache_scope=run.asker,
            )
        if usage.cache_hits["keywords"]:
            run.cache_hits.append("keywords")
        return keywords

    def _searcher(self, scope: Scope | None) -> Searcher:
        restrictor = Restrictor(self.stores, scope) if scope else None
        return Searcher(self.stores, self.embedder, scope, restrictor)

    async def _search(
        self, mode: QueryMode, question: str, param: QueryParam, keywords: Keywords, searcher: Searcher
    ) -> Found:
        if searcher.scope is not None and not searcher.scope.doc_ids:
            return Found()
        texts = list(mode.texts(question, keywords, param))
        if mode.cites_sources and param.chunk_ranking == "similarity":
            texts.append(question)  # to rank the cited chunks by
        await searcher.embed_all(texts)
        if not self._lexical_on(mode, param):
            return await mode.search(question, keywords, param, searcher)
        found, lexical = await asyncio.gather(
            mode.search(question, keywords, param, searcher),
            searcher.lexical_chunks(question, param.chunk_top_k),
        )
        found.lexical = lexical
        return found

    def _lexical_on(self, mode: QueryMode, param: QueryParam) -> bool:
        wanted = mode.uses_lexical if param.lexical is None else param.lexical
        return wanted and self.stores.chunks.indexes_text

    async def _candidates(
        self, mode: QueryMode, question: str, param: QueryParam, found: Found, searcher: Searcher
    ) -> list[ChunkItem]:
        """The chunks the found items come from (when the mode cites them), the
        ones the mode found itself and the lexical channel's, fused by rank (``items.fuse``),
        reranked if asked, cut to ``chunk_top_k``: one chunk bound shared by
        every source, as LightRAG's ``chunk_top_k``."""
        ranked = rank_graph_chunks(found.entities, found.relations) if mode.cites_sources else []
        graph_chunks = await chunk_items(self.stores, ranked, "graph_sources", "support")
        if param.chunk_ranking == "similarity" and graph_chunks:
            await self._by_similarity(await searcher.embed(question), graph_chunks)
        # One list alone comes out of fuse in its own order.
        merged = fuse(*(x for x in (graph_chunks, found.chunks, found.lexical) if x))
        if searcher.scope is not None:  # whatever a mode found: in-scope chunks, cited as in-scope documents
            merged = searcher.scope.own(merged)
        if self.reranker is not None and param.enable_rerank and merged:
            scores = await self.reranker.scores(question, [c.content for c in merged])
            order = sorted(range(len(merged)), key=lambda i: (-float(scores[i]), i))
            merged = [merged[i] for i in order]
        return merged[: param.chunk_top_k]

    async def _by_similarity(self, query: np.ndarray, chunks: list[ChunkItem]) -> None:
        records = await self.stores.chunk_vectors.get([c.id for c in chunks])
        for chunk, rec in zip(chunks, records):
            if rec is not None:
                vec = np.asarray(rec.vector, dtype=np.float32)
                chunk.score = float(vec @ query / ((np.linalg.norm(vec) * np.linalg.norm(query)) or 1.0))
        chunks.sort(key=lambda c: (-(c.score if c.score is not None else -2.0), c.id))

    def _budget(self, question: str, param: QueryParam) -> Budget:
        empty = build_answer_request(
            question, "", history=param.history, response_type=param.response_type,
            language=param.language, user_instructions=param.user_prompt,
        )
        fixed = request_tokens(self.counts, empty)  # the same system prompt query after query
        if fixed >= param.max_total_tokens:
            raise InvalidValueError(
                f"the question, history and answer instructions take {fixed} tokens, not less than "
                f"max_total_tokens={param.max_total_tokens}: raise max_total_tokens or shorten the history"
            )
        # The context ends the system prompt (ANSWER_SYSTEM): what comes before it is the empty request's.
        return Budget(param.max_entity_tokens, param.max_relation_tokens, param.max_total_tokens, fixed,
                      prompt_prefix=empty.system or "")

    async def _answer(
        self, question: str, param: QueryParam, run: _Run, request: ChatRequest, context: Context | None
    ) -> QueryResult:
        result = _result(context, run)
        if param.only_need_context and context is not None:
            return run.finish(result)
        if param.only_need_prompt:
            result.prompt = _render_prompt(request)
            return run.finish(result)
        if self.llm is None:
            raise ConfigError(
                "no LLM configured to answer: set [llm] name in ragkit.toml or RAGKIT_LLM, "
                "or ask for the context only (only_need_context)"
            )
        if param.stream:
            result.stream = self._stream(request, result, run)
            return run.finish(result)
        use_cache = not param.history  # a conversation's answers depend on more than this request
        with run.stage("answer"), counting(LLMStats()) as usage:
            # Answers are kept per scope and asker: one principal's never serves another's.
            answer = await self.llm.complete(request, use_cache=use_cache, scope=run.cache_scope)
        result.answer, result.references = cited(answer, result.sources, _contents(result))
        if usage.cache_hits["answer"]:
            run.cache_hits.append("answer")
        return run.finish(result)

    async def _stream(self, request: ChatRequest, result: QueryResult, run: _Run) -> AsyncIterator[str]:
        assert self.llm is not None
        pieces: list[str] = []
        citations = Citations(result.sources, _contents(result))  # markers renumbered as they stream
        started = time.perf_counter()
        async for piece in self.llm.stream(request):
            if out := citations.feed(piece):
                pieces.append(out)
                yield out
        if out := citations.end():
            pieces.append(out)
            yield out
        result.answer = "".join(pieces)
        result.references = citations.references
        result.metadata["timings"]["answer"] = round(time.perf_counter() - started, 6)


class _Run:
    """Timings and cache hits of one query."""

    def __init__(self, param: QueryParam) -> None:
        self.param = param
        self.timings: dict[str, float] = {}
        self.cache_hits: list[str] = []
        self.meta: dict = {}
        self.cache_scope: str | None = None
        """Names what answers are cached apart for: the scope and the asker."""
        self.asker: str | None = None
        """Names the principal that asks: keywords depend on the question only,
        but a cache hit would tell it that another principal asked the same."""
        self.started = time.perf_counter()

    def cache_for(self, scope: Scope | None, principal: Principal | None) -> None:
        if principal is not None:
            self.asker = ids.digest("asker", principal.user, *sorted(principal.groups))
        parts = [p for p in (scope.key if scope is not None else None, self.asker) if p]
        self.cache_scope = ids.digest(*parts) if len(parts) > 1 else (parts[0] if parts else None)

    @contextmanager
    def stage(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - started, 6)

    def finish(self, result: QueryResult) -> QueryResult:
        self.timings["total"] = round(time.perf_counter() - self.started, 6)
        result.metadata = {"mode": self.param.mode, **self.meta, "timings": self.timings, "cache_hits": self.cache_hits}
        return result


def _result(context: Context | None, run: _Run) -> QueryResult:
    if context is None:
        return QueryResult()
    return QueryResult(
        context=context.text,
        entities=[{"key": e.key, **_public(e.props), "stage": e.stage, "score": e.score, "degree": e.degree}
                  for e in context.entities],
        relations=[{"key": list(r.key), **_public(r.props), "stage": r.stage, "score": r.score, "degree": r.degree}
                   for r in context.relations],
        chunks=[{"id": c.id, "doc_id": c.doc_id, "file_path": c.file_path, "reference": c.reference,
                 "stage": c.stage, "score": c.score, "support": c.support, "content": c.content,
                 "location": c.location.model_dump() if c.location else None}
                for c in context.chunks],
        sources=_sources(context),
    )


def _sources(context: Context) -> list[Reference]:
    located = {c.id: c.location for c in context.chunks}
    out = []
    for n, d, p, ids in context.references:
        locations = [located.get(i) for i in ids]
        out.append(Reference(number=n, source_number=n, doc_id=d, file_path=p, chunk_ids=ids, locations=locations,
                             citation=citation(p or d, locations)))
    return out


def _contents(result: QueryResult) -> dict[str, str]:
    """Chunk id -> text: what a cited source's quoted claims are looked up in."""
    return {c["id"]: c["content"] for c in result.chunks}


def _public(props: dict) -> dict:
    return {k: v for k, v in props.items() if k != "key"}


def _tokens(context: Context, counts: TokenCounts, question: str) -> dict[str, int]:
    # The prompt without context was counted for the budget, and the prompt
    # with it as the context was built (exactly, ``query/context.py``).
    return {**context.tokens, "question": counts.count(question),
            "prompt_total": context.prompt_tokens}


def _render_prompt(request: ChatRequest) -> str:
    parts = [f"[system]\n{request.system}"] if request.system else []
    parts += [f"[{m.role}]\n{m.content}" for m in request.history]
    parts.append(f"[user]\n{request.prompt}")
    return "\n\n".join(parts)
