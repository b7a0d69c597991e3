"""The tools, written once for both transports against a ``Caller``: who is
asking (a principal, or none), whether it may write, and how to reach the
workspace's ``RAG`` (stdio: the one it opened; HTTP: the server's pool and
writer). Every read passes ``principal=`` to the Python API, so a tool shows
exactly what the REST routes show the same principal.

Errors reach the agent as MCP tool errors (``is_error``) naming the problem
and the fix; a model's failure says only its cause (``public_message``), and
an unexpected one only its type: the log has the rest, redacted.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from ragkit.access import AccessList, Principal
from ragkit.core.text import shown_name
from ragkit.errors import RagkitError, describe_validation_error, public_message
from ragkit.pipeline.documents import DocumentPage
from ragkit.query.graph_read import EntityInfo, RelationInfo
from ragkit.rag import RAG
from ragkit.redact import redact
from ragkit.schema import Document, QueryParam, Reference
from ragkit.sections.server import ServerSettings

log = logging.getLogger("ragkit.mcp")
T = TypeVar("T")
NOT_READABLE = " (or none this caller may read)"
"""A hidden element is answered as an absent one; request values are never echoed (they may be secrets)."""
WRITE_TOOLS = frozenset({"insert_texts"})
"""Listed only to callers that may write (and refused to the others)."""
READ_ONLY = ("insert_texts needs write access: this caller may only read. Fix: over HTTP use a key made with "
             "`ragkit keys create --scope write`; with `ragkit mcp` set `[mcp] scope = \"write\"`")


class Caller(Protocol):
    """Who a tool call is made for, and where its workspace is."""

    principal: Principal | None
    """``None``: unrestricted (stdio without ``[mcp] user``, or keyless mode)."""
    can_write: bool
    limits: ServerSettings
    """``max_upload_files`` and ``max_upload_bytes`` bound what one ``insert_texts`` call carries."""

    def reading(self) -> contextlib.AbstractAsyncContextManager[RAG]:
        """The workspace's RAG for one read."""

    async def write(self, work: Callable[[RAG], Awaitable[T]]) -> T:
        """Run ``work`` as the workspace's one writer, and wait for it."""


def caller(ctx: Context) -> Caller:
    return ctx.mcp_server.resolve(ctx.request_context)  # type: ignore[attr-defined]


def _principal(who: Caller) -> dict[str, Any]:
    return {} if who.principal is None else {"principal": who.principal}


def guarded(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Every failure as a tool error the agent may read."""

    @functools.wraps(fn)
    async def tool(*args: Any, **kwargs: Any) -> T:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except RagkitError as exc:
            log.warning("tool %s: %s", fn.__name__, redact(f"{type(exc).__name__}: {exc}", exc=exc))
            raise ToolError(public_message(exc)) from None
        except Exception as exc:
            log.error("tool %s: unexpected %s", fn.__name__, type(exc).__name__, exc_info=exc)
            raise ToolError(f"internal error ({type(exc).__name__}); the server log has the details") from None

    return tool


# -- outputs ---------------------------------------------------------------------------------------


class Answer(BaseModel):
    answer: str
    mode: str
    references: list[Reference]
    """The sources the answer cites, numbered as its [n] markers."""
    metadata: dict[str, Any]
    """Token counts per context section, the budget, cache hits."""


class RetrievedContext(BaseModel):
    context: str
    """What the answer model would be given."""
    entities: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    chunks: list[dict[str, Any]]
    sources: list[Reference]
    metadata: dict[str, Any]


class EntityMatches(BaseModel):
    names: list[str]
    """Entity names, best match first: pass one to get_entity."""


class InsertReport(BaseModel):
    processed: list[str]
    """Ids of the documents indexed now."""
    skipped: list[str]
    """Ids already indexed with the same content (and access list)."""
    failed: dict[str, str]
    """Id -> why its indexing failed."""


# -- inputs ----------------------------------------------------------------------------------------

Question = Annotated[str, Field(min_length=1, description="The question, in natural language.")]
Mode = Annotated[str, Field(description="How to retrieve (see the tool's description for each mode).")]
Budget = Annotated[int | None, Field(ge=1, description="Most tokens in the answer prompt (default 30000).")]
TopK = Annotated[int | None, Field(ge=1, le=1000, description="Entities and relations per search (default 40).")]
DocIds = Annotated[list[str] | None, Field(description="Only these documents (ids from list_documents).")]


def _param(mode: str, budget: int | None, top_k: int | None, doc_ids: list[str] | None, **force: bool) -> QueryParam:
    given = {"mode": mode, "max_total_tokens": budget, "top_k": top_k, "doc_ids": doc_ids, **force}
    try:
        return QueryParam(**{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:  # an unknown mode: the registry's own words, which list the modes
        raise ToolError(f"query parameters: {describe_validation_error(exc)}") from None


# -- the tools -------------------------------------------------------------------------------------


@guarded
async def query(ctx: Context, question: Question, mode: Mode = "ppr", max_total_tokens: Budget = None,
                top_k: TopK = None, doc_ids: DocIds = None) -> Answer:
    """Answer a question from the workspace's documents and knowledge graph, citing its sources:
    the answer's [n] markers are the numbers of `references` (document, path, pages, section)."""
    who = caller(ctx)
    param = _param(mode, max_total_tokens, top_k, doc_ids, stream=False)
    async with who.reading() as rag:
        result = await rag.aquery(question, param, **_principal(who))
    return Answer(answer=result.answer or "", mode=param.mode, references=result.references, metadata=result.metadata)


@guarded
async def retrieve_context(ctx: Context, question: Question, mode: Mode = "ppr", max_total_tokens: Budget = None,
                           top_k: TopK = None, doc_ids: DocIds = None) -> RetrievedContext:
    """Retrieve what an answer would be built from, without answering: the entities, relations and
    passages (chunks) found for the question, their sources, and the context text with token counts."""
    who = caller(ctx)
    param = _param(mode, max_total_tokens, top_k, doc_ids, stream=False, only_need_context=True)
    async with who.reading() as rag:
        r = await rag.aquery(question, param, **_principal(who))
    return RetrievedContext(context=r.context, entities=r.entities, relations=r.relations, chunks=r.chunks,
                            sources=r.sources, metadata=r.metadata)


@guarded
async def search_entities(
    ctx: Context,
    text: Annotated[str, Field(min_length=1, description="Text the entity's name contains (any case).")],
    limit: Annotated[int, Field(ge=1, le=200, description="Most names returned.")] = 20,
) -> EntityMatches:
    """Find entities of the knowledge graph by name; get_entity then gives one's description and sources."""
    who = caller(ctx)
    async with who.reading() as rag:
        return EntityMatches(names=await rag.asearch_entities(text, limit=limit, **_principal(who)))


@guarded
async def get_entity(
    ctx: Context, name: Annotated[str, Field(min_length=1, description="The entity's name (from search_entities).")],
) -> EntityInfo:
    """One entity: its type, description, degree and the documents and passages (chunks) it comes from."""
    who = caller(ctx)
    async with who.reading() as rag:
        found = await rag.aentity(name, **_principal(who))
    if found is None:
        raise ToolError(f"no such entity in this workspace{NOT_READABLE}. Fix: find the exact name with search_entities")
    return found


@guarded
async def get_relation(
    ctx: Context,
    source: Annotated[str, Field(min_length=1, description="One entity's name.")],
    target: Annotated[str, Field(min_length=1, description="The other entity's name (either order).")],
) -> RelationInfo:
    """The relation between two entities: keywords, description, weight and the documents and passages it comes from."""
    who = caller(ctx)
    async with who.reading() as rag:
        found = await rag.arelation(source, target, **_principal(who))
    if found is None:
        raise ToolError(f"no relation between these entities in this workspace{NOT_READABLE}. Fix: check both "
                        "names with search_entities")
    return found


@guarded
async def list_documents(
    ctx: Context,
    status: Annotated[str | None, Field(description="Only this status: pending, processing, processed, failed.")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="Documents per page.")] = 50,
    cursor: Annotated[str | None, Field(description="`next_cursor` of the previous page.")] = None,
) -> DocumentPage:
    """List the workspace's documents (id, path, status, chunks, error), a page at a time, by id."""
    who = caller(ctx)
    async with who.reading() as rag:
        return await rag.adocuments(status, limit, cursor, **_principal(who))


@guarded
async def insert_texts(
    ctx: Context,
    texts: Annotated[list[str], Field(min_length=1, description="Each text is one document's content.")],
    file_paths: Annotated[list[str] | None, Field(description="A name per text, shown in references.")] = None,
    access_users: Annotated[list[str] | None, Field(description="Only these users (and access_groups) may read "
                                                                "them; none: everyone in the workspace.")] = None,
    access_groups: Annotated[list[str] | None, Field(description="Only these groups (and access_users) may read them.")] = None,
) -> InsertReport:
    """Index texts as new documents (write access only); returns when they are indexed."""
    who = caller(ctx)
    if not who.can_write:
        raise ToolError(READ_ONLY)
    if file_paths is not None and len(file_paths) != len(texts):
        raise ToolError("file_paths: give one per text, or none. Fix: match the lengths")
    limits = who.limits
    if len(texts) > limits.max_upload_files:
        raise ToolError(f"{len(texts)} texts is over the limit of {limits.max_upload_files} per call "
                        "([server] max_upload_files). Fix: send them in several calls")
    for n, text in enumerate(texts):
        if len(text.encode()) > limits.max_upload_bytes:
            raise ToolError(f"texts[{n}] is over the limit of {limits.max_upload_bytes} bytes ([server] max_upload_bytes)")
    try:
        listed = AccessList(users=access_users or [], groups=access_groups or []) if access_users or access_groups else None
    except ValueError as exc:
        raise ToolError(f"access_users/access_groups: {describe_validation_error(exc)}. "
                        "Fix: use plain user and group names") from None
    names = [None if p is None else shown_name(p) for p in file_paths or [None] * len(texts)]
    docs = [Document.from_text(t, file_path=p) for t, p in zip(texts, names)]
    options = {**_principal(who), **({"access": listed} if listed else {})}
    _, report = await who.write(lambda rag: rag.ainsert(documents=docs, **options))
    return InsertReport(processed=report.processed, skipped=report.skipped, failed=report.failed)


TOOLS = (query, retrieve_context, search_entities, get_entity, get_relation, list_documents, insert_texts)

