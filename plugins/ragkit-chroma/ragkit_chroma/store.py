"""``ChromaVectorStore``: the vector protocol on Chroma.

One Chroma collection per (workspace, namespace), named
``<prefix>.<workspace>.<namespace>`` (see ``collection_name``), created on the
first write with the cosine space and no embedding function: ragkit always
passes embeddings, so Chroma never embeds (or downloads a model) by itself.

- **Modes.** ``mode = "embedded"`` (the default) opens
  ``chromadb.PersistentClient`` at ``path`` (default ``<working_dir>/chroma``);
  ``mode = "http"`` (implied by ``host``/``port``/``ssl``/``headers``/``auth_token``)
  talks to a Chroma server through ``chromadb.HttpClient``. The ``chroma-http``
  adapter is this store with ``mode = "http"`` as its default. Chroma's clients
  are synchronous: every call runs in a worker thread (``asyncio.to_thread``).
- **Vectors** are normalised (in float64) before they are sent, so ``get``
  returns unit vectors: the direction is kept, the length is not.
- **Scores** are ``1 - cosine distance``. Chroma searches an HNSW index, so the
  store declares ``APPROXIMATE_SEARCH``; ``hnsw_ef_search`` (default 100) sets
  the recall. Candidates are fetched past ``top_k`` until no hit beyond the
  cut ties with the last kept one, so ties are broken by id as the protocol says.
- **Upsert replaces metadata.** Chroma merges metadata on upsert, so keys the
  new metadata lacks are sent as ``None`` (which Chroma deletes).
- **Batches** never exceed the client's ``max_batch_size`` (nor ``batch_size``).
- **Fenced writes.** Chroma has no conditional write, so a write made under the
  workspace's writer lock checks the lease's deadline in the worker thread
  immediately before each request that changes the collection leaves
  (``Permit.send``; past it, the lease is renewed first, on the event loop, or
  the write fails with ``WriterLeaseLostError``). A request that left in time
  but is applied later than the lease's margin, or a stall between that check
  and the request's last byte, is not refused: docs/architecture.md.
- **Dimension** and the embedder are recorded in the collection's metadata
  (``ragkit_dimension``, ``ragkit_embedder``) and read when the store opens; a
  collection of another dimension opens, and its vectors are neither read nor
  written (``VectorStore.check_stored``), and every write checks its vectors.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from ragkit.errors import RagkitError, StoreError
from ragkit.protocols.base import Capability, StoreConfig
from ragkit.protocols.lease import Permit, permit_of
from ragkit.protocols.vector import Filter, VectorStore, search_past_ties, unit_rows
from ragkit.schema import JSONScalar, VectorHit
from ragkit_chroma._where import NO_MATCH, check_metadata, to_where

T = TypeVar("T")

DIMENSION_KEY = "ragkit_dimension"
EMBEDDER_KEY = "ragkit_embedder"
_HTTP_OPTIONS = ("host", "port", "ssl", "auth_token")


@dataclass
class _Write:
    """One caller's validated write: id -> (unit vector, metadata), or None to
    delete; or, with ``drop``, the whole collection."""

    records: dict[str, tuple[np.ndarray, dict[str, JSONScalar]] | None]
    drop: bool = False
    done: asyncio.Future[None] = field(init=False)
    permit: Permit | None = field(init=False, default=None)
    """The writer lock's permit of the task that asked for the write."""


class ChromaOptions(BaseModel):
    """``[vector.options]`` of the ``chroma`` adapter."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["embedded", "http"] | None = None
    """``embedded`` (PersistentClient) or ``http`` (HttpClient); default: ``http``
    if any server option is set, else ``embedded``."""
    path: Path | None = None
    """Embedded: database folder; relative paths are under ``working_dir``
    (default ``<working_dir>/chroma``)."""
    host: str | None = None
    """HTTP: server host (default ``localhost``)."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """HTTP: server port (default 8000)."""
    ssl: bool | None = None
    """HTTP: use https."""
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    """HTTP: extra headers sent with every request (secret: they may carry credentials)."""
    auth_token: SecretStr | None = None
    """HTTP: sent as ``Authorization: Bearer <token>`` (Chroma's token auth)."""
    tenant: str = "default_tenant"
    database: str = "default_database"
    collection_prefix: str = Field(default="ragkit", pattern=r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
    """First part of every collection name; change it to keep two ragkit setups apart."""
    batch_size: int | None = Field(default=None, ge=1)
    """Most records per request (always capped at the client's ``max_batch_size``)."""
    hnsw_ef_search: int = Field(default=100, ge=1)
    """HNSW search breadth of new collections: higher is slower and closer to exact."""
    hnsw_ef_construction: int = Field(default=100, ge=1)
    hnsw_max_neighbors: int = Field(default=16, ge=2)

    @model_validator(mode="after")
    def _pick_mode(self) -> ChromaOptions:
        server = [n for n in _HTTP_OPTIONS if getattr(self, n) is not None]
        if self.headers:
            server.append("headers")
        if self.mode is None:
            self.mode = "http" if server else "embedded"
        if self.mode == "embedded" and server:
            raise ValueError(f"{', '.join(server)} only apply to mode = 'http' (a Chroma server)")
        if self.mode == "http" and self.path is not None:
            raise ValueError("path only applies to mode = 'embedded'; the server owns its data folder")
        return self


class ChromaHttpOptions(ChromaOptions):
    """``[vector.options]`` of the ``chroma-http`` adapter: ``mode`` is ``http``."""

    mode: Literal["http"] = "http"  # type: ignore[assignment]


def collection_name(prefix: str, workspace: str, namespace: str) -> str:
    """``<prefix>.<workspace>.<namespace>``. Chroma wants names to end with a
    letter or digit, so a namespace ending in ``_`` or ``-`` gets ``.0``
    appended; ``.`` never occurs in ragkit names, so names never collide."""
    name = f"{prefix}.{workspace}.{namespace}"
    return name if name[-1].isalnum() else f"{name}.0"


class ChromaVectorStore(VectorStore):
    """Vectors in one Chroma collection per workspace and namespace."""

    name: ClassVar[str] = "chroma"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.PERSISTENT,
            Capability.METADATA_FILTER,
            Capability.APPROXIMATE_SEARCH,
            Capability.CONCURRENT_WRITES,
        }
    )
    Options: ClassVar[type[BaseModel]] = ChromaOptions

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self.options: ChromaOptions
        self._client: Any = None
        self._collection: Any = None
        self._batch = 0
        self._write_lock: asyncio.Lock | None = None
        self._pending: list[_Write] = []

    # -- where things are ----------------------------------------------------------

    @property
    def collection_name(self) -> str:
        return collection_name(self.options.collection_prefix, self.workspace, self.namespace)

    @property
    def path(self) -> Path:
        """Embedded mode's database folder (absolute)."""
        path = self.options.path or Path("chroma")
        if not path.is_absolute():
            path = Path(self.config.working_dir) / path
        return path.resolve()

    @property
    def url(self) -> str:
        """HTTP mode's server URL."""
        o = self.options
        return f"{'https' if o.ssl else 'http'}://{o.host or 'localhost'}:{o.port or 8000}"

    @property
    def location(self) -> str:
        return f"Chroma at {self.url}" if self.options.mode == "http" else f"Chroma at {self.path}"

    def where(self) -> str:
        return f"Chroma collection {self.collection_name!r} ({self.location})"

    @property
    def client(self) -> Any:
        """The chromadb client while the store is open (``None`` otherwise), for
        tools and tests that look at the collection the way Chroma stores it."""
        return self._client

    # -- lifecycle -------------------------------------------------------------------

    async def _open(self) -> None:
        self._client, self._batch = await asyncio.to_thread(self._connect)
        self._collection = None
        self._write_lock = asyncio.Lock()  # bound to the loop that opens the store
        self._pending = []
        try:
            await self._get_collection(create=False)  # an existing collection's dimension is checked now
        except BaseException:
            await self._close()
            raise

    def _connect(self) -> tuple[Any, int]:
        import chromadb
        from chromadb.config import Settings

        o = self.options
        settings = Settings(anonymized_telemetry=False)
        try:
            if o.mode == "http":
                headers = {k: v.get_secret_value() for k, v in o.headers.items()}
                if o.auth_token is not None:
                    headers["Authorization"] = f"Bearer {o.auth_token.get_secret_value()}"
                client = chromadb.HttpClient(
                    host=o.host or "localhost",
                    port=o.port or 8000,
                    ssl=bool(o.ssl),
                    headers=headers or None,
                    settings=settings,
                    tenant=o.tenant,
                    database=o.database,
                )
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(
                    path=str(self.path), settings=settings, tenant=o.tenant, database=o.database
                )
            limit = client.get_max_batch_size()
        except Exception as exc:
            hint = (
                "start a server (`chroma run --path DIR --host 127.0.0.1 --port 8000`) or fix "
                "host/port/ssl/auth_token in [vector.options]"
                if o.mode == "http"
                else "check that the folder is writable and not used by another Chroma version"
            )
            raise StoreError(f"cannot open {self.location}: {type(exc).__name__}: {exc}; {hint}") from exc
        if limit is None or limit < 1:
            limit = 1000
        return client, min(limit, o.batch_size or limit)

    async def _close(self) -> None:
        client, self._client, self._collection = self._client, None, None
        await asyncio.to_thread(client.close)

    async def _drop(self) -> None:
        await self._write(_Write({}, drop=True))
        self.stored_dimension = self.stored_embedder = None

    def _delete_collection(self, send: Callable[[], None]) -> None:
        from chromadb.errors import NotFoundError

        try:
            send()
            self._client.delete_collection(self.collection_name)
        except NotFoundError:
            pass

    # -- the collection ----------------------------------------------------------------

    async def _call(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """Run a Chroma call in a worker thread; its failures become StoreError."""
        try:
            return await asyncio.to_thread(fn, *args)
        except RagkitError:
            raise
        except Exception as exc:
            raise StoreError(
                f"{what} on collection {self.collection_name!r} ({self.location}) failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    async def _get_collection(self, *, create: bool) -> Any:
        """The collection (``None`` if it does not exist and ``create`` is false)."""
        if self._collection is None:
            self._collection = await self._call("open", self._lookup, create)
        return self._collection

    def _lookup(self, create: bool) -> Any:
        from chromadb.errors import NotFoundError

        o = self.options
        try:
            collection = self._client.get_collection(self.collection_name, embedding_function=None)
        except NotFoundError:
            if not create:
                return None
            collection = self._client.get_or_create_collection(
                self.collection_name,
                embedding_function=None,
                configuration={
                    "hnsw": {
                        "space": "cosine",
                        "ef_search": o.hnsw_ef_search,
                        "ef_construction": o.hnsw_ef_construction,
                        "max_neighbors": o.hnsw_max_neighbors,
                    }
                },
                metadata={
                    DIMENSION_KEY: self.dimension,
                    **({EMBEDDER_KEY: self.config.embedder} if self.config.embedder else {}),
                    "ragkit_workspace": self.workspace,
                    "ragkit_namespace": self.namespace,
                },
            )
        self._check_collection(collection)
        return collection

    def _check_collection(self, collection: Any) -> None:
        metadata = collection.metadata or {}
        stored = metadata.get(DIMENSION_KEY)
        self.stored_dimension = stored if stored is not None and stored != self.dimension else None
        self.stored_embedder = metadata.get(EMBEDDER_KEY)
        space = ((collection.configuration or {}).get("hnsw") or {}).get("space", "cosine")
        if space != "cosine":
            raise StoreError(
                f"Chroma collection {self.collection_name!r} ({self.location}) uses the "
                f"{space!r} space; ragkit needs 'cosine'. It was not created by ragkit: "
                "choose another collection_prefix"
            )

    async def _run(self, what: str, fn: Callable[[Any], T], *, create: bool = False) -> T | None:
        """``fn(collection)`` in a worker thread; ``None`` when there is no
        collection. A handle another instance dropped is looked up once again."""
        from chromadb.errors import NotFoundError

        for attempt in (1, 2):
            collection = await self._get_collection(create=create)
            if collection is None:
                return None
            try:
                return await self._call(what, fn, collection)
            except StoreError as exc:
                if attempt == 2 or not isinstance(exc.__cause__, NotFoundError):
                    raise
                self._collection = None
        raise AssertionError("unreachable")

    def _chunks(self, n: int) -> Iterable[slice]:
        return (slice(s, min(s + self._batch, n)) for s in range(0, n, self._batch))

    # -- writes ----------------------------------------------------------------------

    async def _upsert(
        self, ids: list[str], vectors: np.ndarray, metadata: list[dict[str, JSONScalar]]
    ) -> None:
        check_metadata(metadata)
        unit = unit_rows(vectors)
        await self._write(_Write({i: (unit[n], metadata[n]) for n, i in enumerate(ids)}))

    async def _delete(self, ids: list[str]) -> None:
        await self._write(_Write(dict.fromkeys(ids)))

    async def _write(self, op: _Write) -> None:
        """Queue a validated write (or a drop) and wait until it is applied.

        Group commit: each Chroma write costs a commit (~25 ms embedded), so the
        task holding the lock applies every write queued so far in one go, in
        call order (the last write of an id wins), and settles each caller. A
        drop is applied alone, after the writes queued before it.
        """
        assert self._write_lock is not None
        op.done = asyncio.get_running_loop().create_future()
        op.permit = permit_of(self.fence)
        self._pending.append(op)
        async with self._write_lock:
            while not op.done.done():  # else an earlier task applied it with its own
                upto = next((n for n, o in enumerate(self._pending) if o.drop), len(self._pending))
                group = self._pending[: max(upto, 1)]
                del self._pending[: len(group)]
                await self._apply_group(group, op)
        await op.done

    async def _apply_group(self, group: list[_Write], mine: _Write) -> None:
        send = self._sender([o.permit for o in group if o.permit is not None])
        try:
            if group[0].drop:
                await self._call("drop", lambda: self._delete_collection(send))
                self._collection = None
            else:
                create = any(rec is not None for o in group for rec in o.records.values())
                await self._run("write", lambda c: self._apply(c, group, send), create=create)
        except BaseException as exc:
            error = exc if isinstance(exc, Exception) else StoreError(
                f"a write to collection {self.collection_name!r} was interrupted (the task "
                "applying it was cancelled); it may be partly applied"
            )
            for o in group:
                o.done.set_exception(error)
            if error is not exc:
                if mine in group:
                    mine.done.exception()  # retrieved: this task re-raises its cancellation
                raise
        else:
            for o in group:
                o.done.set_result(None)

    def _sender(self, permits: list[Permit]) -> Callable[[], None]:
        """What the worker thread calls immediately before each request that
        changes the collection: returns when every permit of the group lets it
        leave, renewing the lease on the event loop (the thread waits) once a
        deadline passed; raises ``WriterLeaseLostError`` when it was lost."""
        loop = asyncio.get_running_loop()

        def send() -> None:
            for permit in permits:
                if not permit.may_send():
                    asyncio.run_coroutine_threadsafe(permit.send(), loop).result()

        return send

    def _apply(self, collection: Any, group: list[_Write], send: Callable[[], None]) -> None:
        final: dict[str, tuple[np.ndarray, dict[str, JSONScalar]] | None] = {}
        for op in group:
            final.update(op.records)
        gone = [i for i, rec in final.items() if rec is None]
        for part in self._chunks(len(gone)):
            send()
            collection.delete(ids=gone[part])
        kept = [i for i, rec in final.items() if rec is not None]
        for part in self._chunks(len(kept)):
            chunk = kept[part]
            # Chroma merges metadata on upsert: clear the keys the new metadata lacks.
            old = collection.get(ids=chunk, include=["metadatas"])
            old_keys = {i: set(m or ()) for i, m in zip(old["ids"], old["metadatas"] or [])}
            payload: list[dict[str, Any] | None] = []
            for id_ in chunk:
                meta = final[id_][1]  # type: ignore[index]
                full: dict[str, Any] = dict(meta)
                full.update((k, None) for k in old_keys.get(id_, set()) - meta.keys())
                payload.append(full or None)
            embeddings = np.stack([final[i][0] for i in chunk])  # type: ignore[index]
            send()
            collection.upsert(
                ids=chunk,
                embeddings=embeddings,
                metadatas=payload if any(p is not None for p in payload) else None,
            )

    # -- reads -------------------------------------------------------------------------

    async def _count(self) -> int:
        return await self._run("count", lambda c: c.count()) or 0

    async def _ids(self) -> AsyncIterator[str]:
        offset, page = 0, self._batch
        while True:
            got = await self._run("ids", lambda c: c.get(include=[], limit=page, offset=offset))
            if got is None:
                return
            for id_ in got["ids"]:
                yield id_
            if len(got["ids"]) < page:
                return
            offset += page

    async def _records(self, batch: int) -> AsyncIterator[dict[str, tuple[list[float], dict[str, Any]]]]:
        # The ids scan's pages, with embeddings and metadata: one request per page.
        offset, page = 0, min(batch, self._batch)
        while True:
            got = await self._run(
                "records",
                lambda c: c.get(include=["embeddings", "metadatas"], limit=page, offset=offset),
            )
            if got is None:
                return
            yield {
                id_: (np.asarray(vec, dtype=np.float32).tolist(), meta or {})
                for id_, vec, meta in zip(got["ids"], got["embeddings"], got["metadatas"])
            }
            if len(got["ids"]) < page:
                return
            offset += page

    async def _get(self, ids: list[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        def fetch(collection: Any) -> dict[str, tuple[list[float], dict[str, Any]]]:
            found = {}
            for part in self._chunks(len(ids)):
                got = collection.get(ids=ids[part], include=["embeddings", "metadatas"])
                for id_, vec, meta in zip(got["ids"], got["embeddings"], got["metadatas"]):
                    found[id_] = (np.asarray(vec, dtype=np.float32).tolist(), meta or {})
            return found

        return await self._run("get", fetch) or {}

    async def _query(
        self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None
    ) -> list[VectorHit]:
        where = to_where(filter)
        if where is NO_MATCH:
            return []
        q_unit = unit.astype(np.float32).reshape(1, -1)

        async def search(n: int) -> list[VectorHit]:
            got = await self._run(
                "query",
                lambda c: c.query(
                    query_embeddings=q_unit, n_results=n, where=where or None, include=["metadatas", "distances"]
                ),
            )
            if got is None:
                return []
            metas = got["metadatas"][0] if got.get("metadatas") else None
            return [
                VectorHit(
                    id=id_,
                    score=min(1.0, max(-1.0, 1.0 - float(distance))),
                    metadata=dict((metas[i] if metas else None) or {}),
                )
                for i, (id_, distance) in enumerate(zip(got["ids"][0], got["distances"][0]))
            ]

        return await search_past_ties(search, top_k, min_score)


class ChromaHttpVectorStore(ChromaVectorStore):
    """The ``chroma`` store with ``mode = "http"`` as its default: a Chroma server."""

    name: ClassVar[str] = "chroma-http"
    Options: ClassVar[type[BaseModel]] = ChromaHttpOptions
