"""Typed records passed between stages and held by the stores.

Every model here is a pydantic model so that values crossing a boundary (a
store, a plugin, the CLI's JSON output) are validated in one place.
"""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit import ids
from ragkit.access import AccessList
from ragkit.errors import RagkitError

JSONScalar = str | int | float | bool
PropertyValue = str | int | float | bool | list[str | int | float]
"""Values a graph property may hold (what every graph database accepts)."""


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- records the stores hold -------------------------------------------------


class VectorHit(Frozen):
    """One result of a vector query: cosine similarity in [-1, 1]."""

    id: str
    score: float
    metadata: dict[str, JSONScalar] = Field(default_factory=dict)


class VectorRecord(BaseModel):
    """A stored vector as read back (for migration and consistency checks)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    vector: list[float]
    metadata: dict[str, JSONScalar] = Field(default_factory=dict)


class Edge(Frozen):
    """An undirected edge; ``source <= target`` always (canonical order)."""

    source: str
    target: str
    properties: dict[str, PropertyValue] = Field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.target)


class Node(Frozen):
    id: str
    properties: dict[str, PropertyValue] = Field(default_factory=dict)


class Subgraph(Frozen):
    """A bounded neighbourhood; ``truncated`` says ``max_nodes`` cut it short."""

    nodes: list[Node] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    truncated: bool = False


class DocStatus(str, Enum):
    PENDING = "pending"
    PROCESSING = "processing"
    PROCESSED = "processed"
    FAILED = "failed"
    DELETING = "deleting"
    """Being deleted: set before anything is removed, so a delete cut short (a
    crash, ``kill -9``) is found by status and finished by the next index run.
    The record itself is removed last; nothing leaves this status."""


# Which status changes the document lifecycle allows. Re-processing a processed
# document (an update) goes back through pending or processing. Any document
# can start being deleted.
ALLOWED_TRANSITIONS: dict[DocStatus, frozenset[DocStatus]] = {
    DocStatus.PENDING: frozenset({DocStatus.PROCESSING, DocStatus.FAILED, DocStatus.DELETING}),
    DocStatus.PROCESSING: frozenset(
        {DocStatus.PROCESSED, DocStatus.FAILED, DocStatus.PENDING, DocStatus.DELETING}
    ),
    DocStatus.PROCESSED: frozenset({DocStatus.PENDING, DocStatus.PROCESSING, DocStatus.DELETING}),
    DocStatus.FAILED: frozenset({DocStatus.PENDING, DocStatus.PROCESSING, DocStatus.DELETING}),
    DocStatus.DELETING: frozenset(),
}

LEGACY_DELETING_FLAG = "ragkit_deleting"
"""The metadata flag that marked a delete in progress before ``DocStatus.DELETING``
existed; workspaces written then may still hold it, and recovery honours it."""


class DocStatusRecord(BaseModel):
    """What the doc-status store keeps per document."""

    model_config = ConfigDict(extra="forbid")

    id: str
    status: DocStatus = DocStatus.PENDING
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    error: str | None = None
    chunk_ids: list[str] = Field(default_factory=list)
    content_hash: str = ""
    file_path: str | None = None
    content_length: int = 0
    metadata: dict[str, JSONScalar] = Field(default_factory=dict)
    access: AccessList | None = None
    """Who may read the document (``ragkit.access``); ``None``: everyone in the workspace."""

    @field_validator("created_at", "updated_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        # Naive datetimes are taken as UTC so every backend compares them alike.
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class DocStatusPage(Frozen):
    """One page of a listing; pass ``next_cursor`` back to get the next one."""

    items: list[DocStatusRecord]
    next_cursor: str | None = None


# --- pipeline models -----------------------------------------------------------


PageUnit = Literal["page", "slide", "sheet"]


class Segment(Frozen):
    """Where ``content[start:end]`` of a loaded document came from: a page,
    slide or sheet (1-based ``page``) and the heading path (``section``).
    Loaders of PDF, Office, HTML and EPUB files set them (``ragkit.loaders``)."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    page: int | None = Field(default=None, ge=1)
    section: str | None = None


class Location(Frozen):
    """Where a chunk came from: ``content[char_start:char_end]`` of its
    document, the pages (slides, sheets) it spans and the section most of it is in."""

    char_start: int
    char_end: int
    page_start: int | None = None
    page_end: int | None = None
    unit: PageUnit = "page"
    section: str | None = None

    def label(self) -> str:
        """``p. 12–13, §3.2``; empty for a text without pages or sections."""
        parts = []
        if self.page_start is not None:
            pages = str(self.page_start)
            if self.page_end is not None and self.page_end != self.page_start:
                pages += f"\u2013{self.page_end}"
            parts.append({"page": "p. ", "slide": "slide ", "sheet": "sheet "}[self.unit] + pages)
        if self.section:
            parts.append(f"\u00a7{self.section}")
        return ", ".join(parts)


class Document(Frozen):
    id: str
    content: str
    file_path: str | None = None
    metadata: dict[str, JSONScalar] = Field(default_factory=dict)
    access: AccessList | None = None
    """Who may read it (``ragkit.access``); ``None``: everyone in the workspace."""
    segments: list[Segment] = Field(default_factory=list)
    """Pages and sections, in order (empty for plain text)."""
    unit: PageUnit = "page"
    """What a segment's ``page`` counts."""

    @classmethod
    def from_text(
        cls, content: str, file_path: str | None = None, **metadata: JSONScalar
    ) -> Document:
        return cls(
            id=ids.doc_id(content), content=content, file_path=file_path, metadata=metadata
        )


class Chunk(Frozen):
    id: str
    doc_id: str
    content: str
    order: int
    tokens: int
    file_path: str | None = None
    location: Location | None = None

    @classmethod
    def create(cls, doc: Document, content: str, order: int, tokens: int) -> Chunk:
        return cls(
            id=ids.chunk_id(content),
            doc_id=doc.id,
            content=content,
            order=order,
            tokens=tokens,
            file_path=doc.file_path,
        )


class Entity(Frozen):
    name: str
    type: str = "entity"
    description: str = ""
    source_ids: list[str] = Field(default_factory=list)

    @property
    def id(self) -> str:
        return ids.entity_id(self.name)


class Relation(Frozen):
    source: str
    target: str
    keywords: str = ""
    description: str = ""
    strength: float = 1.0
    source_ids: list[str] = Field(default_factory=list)

    @property
    def id(self) -> str:
        return ids.relation_id(self.source, self.target)


class QueryParam(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: str = "ppr"
    """A registered query mode (``ragkit plugins`` lists them; built-in: naive,
    local, global, hybrid, mix, ppr, bypass) or an import path ``pkg.mod:Class``. ``ppr`` by
    default: the best recall at equal cost (20 chunks, LightRAG's context size;
    measured in benchmarks/findings.md)."""
    top_k: int = Field(default=40, ge=1)
    chunk_top_k: int = Field(default=20, ge=1)
    """Most chunks in the context, from every source (vector hits, chunks cited by
    graph items, chunks the walk reached), fused by rank: LightRAG's meaning."""
    max_entity_tokens: int = Field(default=6000, ge=0)
    max_relation_tokens: int = Field(default=8000, ge=0)
    max_total_tokens: int = Field(default=30000, ge=1)
    high_level_keywords: list[str] | None = None
    low_level_keywords: list[str] | None = None
    only_need_context: bool = False
    only_need_prompt: bool = False
    stream: bool = False
    doc_ids: list[str] | None = None
    """Scope: only these documents, in every stage."""
    doc_filter: dict[str, Any] | None = None
    """Scope: documents whose metadata match (``{"team": "a"}``, ``{"year": {"$in": [2023, 2024]}}``)."""
    history: list[dict[str, str]] = Field(default_factory=list)
    """Earlier turns, ``{"role", "content"}``; given to the answer call only."""
    response_type: str = "Multiple Paragraphs"
    language: str = "English"
    user_prompt: str = ""
    """Extra instructions for the answer (style, length); part of the answer's cache key."""
    enable_rerank: bool = True
    """Rerank chunks when a reranker is configured."""
    chunk_ranking: Literal["support", "similarity"] = "support"
    """Graph-found chunks ranked by how many found items cite them, or by similarity to the question."""
    lexical: bool | None = None
    """The lexical channel: chunks ranked by the question's words (BM25 over
    the chunk store's text index, when it keeps one: ``Capability.TEXT_SEARCH``),
    fused by rank with the mode's own chunks. ``None``: where the mode uses it
    (``QueryMode.uses_lexical``: local and global, chosen on half A of the dev
    questions); ``True``: in every retrieving mode; ``False``: nowhere."""

    @field_validator("mode")
    @classmethod
    def _registered_mode(cls, value: str) -> str:
        # Modes are plugins: the registry is the one list of them.
        from ragkit.plugins import get_registry

        try:
            get_registry().get("query_mode", value)
        except RagkitError as exc:
            raise ValueError(str(exc)) from None
        return value


class Reference(Frozen):
    """A source of the context (``QueryResult.sources``) or one the answer
    cites (``QueryResult.references``)."""

    number: int
    """The number the answer cites it by (``[n]``) in ``references``; its
    number in the context in ``sources``."""
    source_number: int | None = None
    """Its number in the context (the ``[n] path`` lines, the chunks'
    ``reference``) and in ``sources``."""
    doc_id: str
    file_path: str | None = None
    chunk_ids: list[str] = Field(default_factory=list)
    locations: list[Location | None] = Field(default_factory=list)
    """Where each of ``chunk_ids`` came from (``None`` for chunks indexed before locations existed)."""
    citation: str = ""
    """The file (or doc id) with the pages and section cited: ``report.pdf p. 12–13, §3.2``."""


class QueryResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    answer: str | None = None
    prompt: str | None = None
    """The answer call's full prompt (``only_need_prompt``)."""
    stream: Any = Field(default=None, exclude=True, repr=False)
    """With ``stream=True``: the answer pieces (an async iterator from ``aquery``, a
    plain one from ``query``); ``answer`` is set once it ends."""
    context: str = ""
    entities: list[dict[str, Any]] = Field(default_factory=list)
    relations: list[dict[str, Any]] = Field(default_factory=list)
    chunks: list[dict[str, Any]] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    """The sources the answer cites, numbered in the order it first cites them
    (the answer's ``[n]`` markers are rewritten to match). Empty without an
    answer (``only_need_context``, ``only_need_prompt``) or when it cites none."""
    sources: list[Reference] = Field(default_factory=list)
    """Every source of the context, cited or not, numbered as in the context."""
    metadata: dict[str, Any] = Field(default_factory=dict)
