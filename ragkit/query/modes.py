"""Query modes: how a question becomes entities, relations and chunks.

A mode is a small class registered like an adapter (hook
``register_query_modes``; the built-ins below are registered by
``ragkit.builtin``). It declares what the query needs before it searches, and
searches with the ``Searcher``'s primitives; ``Querier`` runs the stages
around it (keywords, one embedder call, supporting chunks, the budgeted
context, the answer) and never tests a mode's name.

- ``naive``: the question's nearest chunks (dense retrieval, no keywords);
- ``local``: low-level keywords -> entities -> their relations;
- ``global``: high-level keywords -> relations -> their endpoints;
- ``hybrid``: local and global, interleaved;
- ``mix``: hybrid plus naive's chunks (which, since every graph mode keeps
  naive's chunks as a floor, is hybrid: LightRAG's name kept);
- ``ppr``: personalized PageRank from the question's entities (``query/ppr.py``);

local, global and hybrid fuse the chunks their items come from with the
question's nearest chunks, by rank: a graph mode never ranks worse than dense
retrieval in the same chunk bound.
- ``bypass``: no retrieval; the LLM answers the question alone.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from ragkit.query.items import ChunkItem, EntityItem, RelationItem, fuse, round_robin
from ragkit.query.keywords import Keywords
from ragkit.query.search import Searcher, chunk_items, keyword_text
from ragkit.schema import QueryParam

__all__ = [  # what a mode author needs, importable from here
    "BUILTIN_MODES", "Found", "Keywords", "ModeInfo", "QueryMode", "QueryParam", "Searcher",
    "available_modes", "chunk_items", "fuse", "round_robin",
]


@dataclass
class Found:
    """What a mode's search found, each list best first."""

    entities: list[EntityItem] = field(default_factory=list)
    relations: list[RelationItem] = field(default_factory=list)
    chunks: list[ChunkItem] = field(default_factory=list)
    """Chunks the mode found itself; fused by rank with the chunks the found
    entities and relations come from when the mode ``cites_sources``."""
    lexical: list[ChunkItem] = field(default_factory=list)
    """Chunks the question's words found (``Querier`` fills it when the
    lexical channel is on: ``QueryParam.lexical``), fused by rank with the others."""


class QueryMode:
    """One way of retrieving a context. Subclass it, set ``name``, define
    ``texts`` and ``search``, and register the class from a plugin::

        @hookimpl
        def register_query_modes(register):
            register(MyMode)

    An instance serves one query. Scoping (``doc_ids``, ``doc_filter``) is the
    ``Searcher``'s job: a mode that searches through it is scoped for free.
    """

    name: ClassVar[str] = ""
    """What ``QueryParam.mode`` and ``ragkit query --mode`` call it."""
    description: ClassVar[str] = ""
    """One line for listings (``ragkit plugins``, the CLI's help)."""
    retrieves: ClassVar[bool] = True
    """``False``: no keywords, no search, no context; the LLM answers the
    question alone (``bypass``)."""
    extracts_keywords: ClassVar[bool] = True
    """The search uses high- and low-level keywords (one LLM call unless the
    user gave them); without, ``search`` gets empty ``Keywords``."""
    cites_sources: ClassVar[bool] = True
    """The chunks the found entities and relations come from join the context,
    ranked by how many found items cite them (or by similarity to the
    question); ``False`` when the search ranked its chunks itself."""
    uses_lexical: ClassVar[bool] = False
    """By default (``QueryParam.lexical=None``), the chunks that best share the
    question's words (BM25 over the chunk store's text index) join the chunk
    ranking, fused by rank. On in local and global only: chosen on half A of
    the dev questions, where it lowered recall@5 in naive, hybrid and ppr
    (``benchmarks/findings.md``, "the lexical channel")."""

    def texts(self, question: str, keywords: Keywords, param: QueryParam) -> list[str]:
        """Every text ``search`` will embed: they are embedded in one call
        before it runs (``searcher.vectors``), so a model's fixed cost per call
        is paid once per query."""
        return []

    async def search(self, question: str, keywords: Keywords, param: QueryParam, searcher: Searcher) -> Found:
        raise NotImplementedError(f"query mode {self.name!r} defines no search()")


class Naive(QueryMode):
    name = "naive"
    description = "the question's nearest chunks (dense retrieval; no keywords, no graph)"
    extracts_keywords = False

    def texts(self, question: str, keywords: Keywords, param: QueryParam) -> list[str]:
        return [question]

    async def search(self, question: str, keywords: Keywords, param: QueryParam, searcher: Searcher) -> Found:
        return Found(chunks=await searcher.chunks(question, param.chunk_top_k))


class Local(QueryMode):
    name = "local"
    description = "entities near the low-level keywords, with their relations"
    uses_lexical = True

    def texts(self, question: str, keywords: Keywords, param: QueryParam) -> list[str]:
        return [*_joined(keywords.low_level), question]

    async def search(self, question: str, keywords: Keywords, param: QueryParam, searcher: Searcher) -> Found:
        (entities, relations), dense = await searcher.together(
            searcher.local(keywords.low_level, param.top_k), _dense_floor(question, param, searcher))
        return Found(entities, relations, dense)


class Global(QueryMode):
    name = "global"
    description = "relations near the high-level keywords, with their endpoints"
    uses_lexical = True

    def texts(self, question: str, keywords: Keywords, param: QueryParam) -> list[str]:
        return [*_joined(keywords.high_level), question]

    async def search(self, question: str, keywords: Keywords, param: QueryParam, searcher: Searcher) -> Found:
        (entities, relations), dense = await searcher.together(
            searcher.global_(keywords.high_level, param.top_k), _dense_floor(question, param, searcher))
        return Found(round_robin(entities), round_robin(relations), dense)


class Hybrid(QueryMode):
    name = "hybrid"
    description = "local and global, interleaved"

    def texts(self, question: str, keywords: Keywords, param: QueryParam) -> list[str]:
        return [*_joined(keywords.low_level), *_joined(keywords.high_level), question]

    async def search(self, question: str, keywords: Keywords, param: QueryParam, searcher: Searcher) -> Found:
        (entities, relations), (g_entities, g_relations), dense = await searcher.together(
            searcher.local(keywords.low_level, param.top_k), searcher.global_(keywords.high_level, param.top_k),
            _dense_floor(question, param, searcher))
        return Found(round_robin(entities, g_entities), round_robin(relations, g_relations), dense)


class Mix(Hybrid):
    """LightRAG's mix: hybrid plus the question's nearest chunks. Since every
    graph mode keeps that floor (``_dense_floor``), it retrieves what
    ``hybrid`` does; the name stays for LightRAG's users."""

    name = "mix"
    description = "hybrid plus the question's nearest chunks (the same as hybrid in ragkit)"


async def _dense_floor(question: str, param: QueryParam, searcher: Searcher) -> list[ChunkItem]:
    """The question's nearest chunks, fused by rank (``items.fuse``) with the
    chunks the graph items come from. Why: a graph mode must never do worse
    than dense retrieval in the same chunk bound. With 20 chunks, the chunks
    cited by local's entities alone held 0.677 of the dev questions'
    supporting passages against naive's 0.752; fused, 0.792 (global 0.690 ->
    0.768, hybrid 0.735 -> 0.790; ``benchmarks/findings.md``, "equal cost")."""
    return await searcher.chunks(question, param.chunk_top_k)


class PPR(QueryMode):
    name = "ppr"
    description = "personalized PageRank from the question's entities, for multi-hop questions (the default)"
    cites_sources = False  # the walk scored its chunks already

    def texts(self, question: str, keywords: Keywords, param: QueryParam) -> list[str]:
        # Each low-level keyword links its own seeds; the high-level ones stand in for none.
        return [*keywords.low_level, *_joined(keywords.high_level), question]

    async def search(self, question: str, keywords: Keywords, param: QueryParam, searcher: Searcher) -> Found:
        (entities, relations, ranked), dense = await searcher.together(
            searcher.ppr(keywords.low_level, keywords.high_level, param.top_k, question),
            searcher.chunks(question, param.chunk_top_k))
        walked = await chunk_items(searcher.stores, ranked, "ppr", "score")
        return Found(entities, relations, fuse(dense, walked))


class Bypass(QueryMode):
    name = "bypass"
    description = "no retrieval: the LLM answers the question alone"
    retrieves = False
    extracts_keywords = False


BUILTIN_MODES: tuple[type[QueryMode], ...] = (Naive, Local, Global, Hybrid, Mix, PPR, Bypass)


def _joined(keywords: list[str]) -> list[str]:
    return [keyword_text(keywords)] if keywords else []


# -- the registry's view ------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def refusal(cls: Any, name: str) -> str | None:
    """Why ``cls`` cannot be query mode ``name``, or ``None``. The registry
    asks at registration, so a mis-declared mode is listed by ``ragkit
    plugins`` with the reason and never reaches a query."""
    what = getattr(cls, "__qualname__", repr(cls))
    if not (isinstance(cls, type) and issubclass(cls, QueryMode)):
        return f"{what} is not a subclass of ragkit.query.modes.QueryMode"
    if not _NAME.fullmatch(name):
        return f"mode name {name!r}: use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit"
    if cls.retrieves and cls.search is QueryMode.search:
        return (f"{what} retrieves a context but defines no search(question, keywords, param, searcher); "
                f"define it, or set retrieves = False")
    if not inspect.iscoroutinefunction(cls.search):
        return f"{what}.search must be a coroutine function (async def search(...))"
    if inspect.iscoroutinefunction(cls.texts):
        return f"{what}.texts must be a plain method returning a list of texts (not async)"
    try:
        inspect.signature(cls).bind()
    except TypeError:
        return f"{what} must be constructible without arguments (one instance serves one query)"
    return None


class ModeInfo(BaseModel):
    """A registered query mode, as listings show it."""

    name: str
    description: str
    distribution: str
    version: str


def available_modes(registry: Any = None) -> list[ModeInfo]:
    """Every usable query mode, by name: the CLI's ``--mode`` choices and the
    list a server offers come from here (or ``Registry.names("query_mode")``)."""
    from ragkit.plugins import get_registry

    registry = registry or get_registry()
    return [ModeInfo(name=i.name, description=i.cls.description, distribution=i.distribution, version=i.version)
            for i in sorted(registry.adapters("query_mode"), key=lambda i: i.name)]
