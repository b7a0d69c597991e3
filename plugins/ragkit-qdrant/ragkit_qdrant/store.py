"""``QdrantVectorStore``: the vector protocol on Qdrant, through ``AsyncQdrantClient``.

- **Modes.** ``url`` (with ``api_key``, ``prefer_grpc``) talks to a Qdrant
  server; ``location = ":memory:"`` or ``path`` run Qdrant's local mode inside
  the process (no server; brute-force search, meant for development and
  tests). With none of them set, local mode stores under
  ``<working_dir>/qdrant``. Local clients are shared by every store of the
  process using the same path (Qdrant locks the folder against a second
  client); the ``:memory:`` one lives as long as the process.
- **Layout.** One collection per namespace, ``<prefix>_<namespace>``, shared by
  every workspace: the workspace is a payload field (``_ragkit_workspace``,
  indexed with ``is_tenant`` on servers) that every read, count, delete and
  drop filters on. This is Qdrant's recommended multitenancy: collections
  are heavy (own segments, WAL, HNSW graph) while tenant-partitioned payload
  indexes are cheap, so thousands of workspaces stay one collection. The
  price: every workspace of a namespace shares the collection's dimension.
- **Ids.** Qdrant point ids are UUIDs or integers: a ragkit id becomes
  ``uuid5(NAMESPACE, "<workspace>/<id>")`` and the original id is kept in the
  payload (``_ragkit_id``); user metadata keys starting with ``_ragkit_`` are
  refused.
- **Vectors and scores.** Cosine distance; Qdrant stores vectors normalised,
  so ``get`` returns unit vectors, and scores are its cosine similarities.
  Server search is HNSW (``APPROXIMATE_SEARCH``): ``hnsw_ef`` raises recall,
  ``exact = true`` scans everything. Candidates are fetched past ``top_k``
  until no hit beyond the cut ties with the last kept one.
- **Writes** go in batches of ``batch_size`` points with ``wait=True``, so a
  write is visible to the next read.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from ragkit.errors import RagkitError, StoreError
from ragkit.protocols.base import Capability, StoreConfig
from ragkit.protocols.vector import Filter, VectorStore, search_past_ties, unit_rows
from ragkit.schema import JSONScalar, VectorHit

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient, models

# qdrant_client is imported inside the methods that use it: importing it takes
# ~0.5 s (hundreds of pydantic models), and this module is imported whenever
# ragkit lists its plugins, also by users who never pick Qdrant.
from ragkit_qdrant._filter import (
    ID_KEY,
    NO_MATCH,
    WORKSPACE_KEY,
    check_metadata,
    to_filter,
    workspace_filter,
)

ID_NAMESPACE = uuid.UUID("6f1d7c2e-3b9a-5c4e-9a7b-2d8e0f1a4c3b")
"""UUIDv5 namespace of point ids: ``uuid5(ID_NAMESPACE, f"{workspace}/{id}")``."""
EMBEDDER_KEY = "ragkit_embedder"
"""The collection's metadata key naming the embedder that made it (``vector.embedder_label``)."""


class QdrantOptions(BaseModel):
    """``[vector.options]`` of the ``qdrant`` adapter."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    """Server URL, e.g. ``http://localhost:6333``."""
    api_key: SecretStr | None = None
    """Server API key (Qdrant Cloud, or a server started with one)."""
    prefer_grpc: bool = False
    """Server: talk gRPC (port ``grpc_port``) instead of REST."""
    grpc_port: int = Field(default=6334, ge=1, le=65535)
    timeout: int | None = Field(default=None, ge=1)
    """Server: seconds per request (the client's default if unset)."""
    location: Literal[":memory:"] | None = None
    """Local mode in memory, shared by the whole process and gone with it."""
    path: Path | None = None
    """Local mode on disk; relative paths are under ``working_dir``
    (default when no mode is set: ``<working_dir>/qdrant``)."""
    collection_prefix: str = Field(default="ragkit", pattern=r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
    """Collections are ``<prefix>_<namespace>``; change it to keep ragkit setups apart."""
    batch_size: int = Field(default=256, ge=1)
    """Points per upsert/retrieve/delete request."""
    hnsw_ef: int | None = Field(default=None, ge=1)
    """Server: HNSW search breadth (the collection's default if unset)."""
    exact: bool = False
    """Server: exact search (full scan) instead of HNSW."""

    @model_validator(mode="after")
    def _one_mode(self) -> QdrantOptions:
        given = [n for n in ("url", "location", "path") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"set only one of url, location, path (got {', '.join(given)})")
        if self.url is None:
            server_only = [n for n in ("api_key", "timeout", "hnsw_ef") if getattr(self, n) is not None]
            server_only += [n for n in ("prefer_grpc", "exact") if getattr(self, n)]
            if server_only:
                raise ValueError(f"{', '.join(server_only)} only apply with url (a Qdrant server)")
        return self


class _LocalClients:
    """Local-mode clients shared per path in this process (Qdrant locks the
    folder, so a second client on it would fail); ``:memory:`` is never closed."""

    clients: ClassVar[dict[str, tuple[AsyncQdrantClient, int]]] = {}

    @classmethod
    def acquire(cls, key: str) -> AsyncQdrantClient:
        from qdrant_client import AsyncQdrantClient
        client, users = cls.clients.get(key, (None, 0))
        if client is None:
            client = AsyncQdrantClient(location=key) if key == ":memory:" else AsyncQdrantClient(path=key)
        cls.clients[key] = (client, users + 1)
        return client

    @classmethod
    async def release(cls, key: str) -> None:
        client, users = cls.clients[key]
        if users > 1 or key == ":memory:":
            cls.clients[key] = (client, users - 1)
            return
        del cls.clients[key]
        await client.close()


def point_id(workspace: str, id_: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"{workspace}/{id_}"))


class QdrantVectorStore(VectorStore):
    """Vectors in one Qdrant collection per namespace, workspaces as a payload field."""

    name: ClassVar[str] = "qdrant"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.PERSISTENT,
            Capability.METADATA_FILTER,
            Capability.APPROXIMATE_SEARCH,
            Capability.CONCURRENT_WRITES,
        }
    )
    Options: ClassVar[type[BaseModel]] = QdrantOptions

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self.options: QdrantOptions
        self._client: AsyncQdrantClient | None = None
        self._local_key: str | None = None

    # -- where things are ----------------------------------------------------------

    @property
    def collection_name(self) -> str:
        return f"{self.options.collection_prefix}_{self.namespace}"

    @property
    def mode(self) -> Literal["server", "memory", "local"]:
        o = self.options
        return "server" if o.url else "memory" if o.location else "local"

    @property
    def path(self) -> Path:
        """Local mode's folder (absolute)."""
        path = self.options.path or Path("qdrant")
        if not path.is_absolute():
            path = Path(self.config.working_dir) / path
        return path.resolve()

    @property
    def location(self) -> str:
        if self.mode == "server":
            return f"Qdrant at {self.options.url}"
        return "Qdrant in memory" if self.mode == "memory" else f"Qdrant (local) at {self.path}"

    def _filter(self) -> models.Filter:
        return workspace_filter(self.workspace)

    # -- lifecycle -------------------------------------------------------------------

    async def _open(self) -> None:
        self._client = self._connect()
        try:
            await self._ensure_collection()
        except BaseException:
            await self._close()
            raise

    def _connect(self) -> AsyncQdrantClient:
        from qdrant_client import AsyncQdrantClient
        o = self.options
        try:
            if self.mode == "server":
                return AsyncQdrantClient(
                    url=o.url,
                    api_key=o.api_key.get_secret_value() if o.api_key else None,
                    prefer_grpc=o.prefer_grpc,
                    grpc_port=o.grpc_port,
                    timeout=o.timeout,
                )
            if self.mode == "memory":
                self._local_key = ":memory:"
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                self._local_key = str(self.path)
            return _LocalClients.acquire(self._local_key)
        except Exception as exc:
            hint = (
                "another process holds this folder: use a Qdrant server for shared access"
                if "already accessed" in str(exc)
                else "check url/api_key in [vector.options]"
            )
            raise StoreError(f"cannot open {self.location}: {type(exc).__name__}: {exc}; {hint}") from exc

    async def _close(self) -> None:
        client, self._client = self._client, None
        key, self._local_key = self._local_key, None
        if key is not None:
            await _LocalClients.release(key)
        elif client is not None:
            await client.close()

    async def _call(self, what: str, coro: Any) -> Any:
        """Await a client call; its failures become StoreError naming the collection."""
        try:
            return await coro
        except RagkitError:
            raise
        except Exception as exc:
            raise StoreError(
                f"{what} on collection {self.collection_name!r} ({self.location}) failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    async def _ensure_collection(self) -> None:
        from qdrant_client import models
        client, name = self.client, self.collection_name
        if not await self._call("open", client.collection_exists(name)):
            try:
                await client.create_collection(
                    name,
                    vectors_config=models.VectorParams(size=self.dimension, distance=models.Distance.COSINE),
                    metadata={EMBEDDER_KEY: self.config.embedder} if self.config.embedder else None,
                )
            except Exception:
                if not await client.collection_exists(name):  # else another client created it
                    raise
            if self.mode == "server":
                await self._call(
                    "create_payload_index",
                    client.create_payload_index(
                        name,
                        WORKSPACE_KEY,
                        field_schema=models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
                    ),
                )
        info = await self._call("open", client.get_collection(name))
        params = info.config.params.vectors
        if not isinstance(params, models.VectorParams):
            raise StoreError(
                f"Qdrant collection {name!r} ({self.location}) uses named vectors; ragkit needs "
                "one unnamed vector per point. It was not created by ragkit: choose another collection_prefix"
            )
        # Another dimension: the store opens, its vectors are neither read nor written (check_stored).
        self.stored_dimension = params.size if params.size != self.dimension else None
        self.stored_embedder = (getattr(info.config, "metadata", None) or {}).get(EMBEDDER_KEY)
        if params.distance != models.Distance.COSINE:
            raise StoreError(
                f"Qdrant collection {name!r} ({self.location}) uses {params.distance} distance; "
                "ragkit needs Cosine. It was not created by ragkit: choose another collection_prefix"
            )

    def where(self) -> str:
        return f"Qdrant collection {self.collection_name!r} ({self.location})"

    def drop_hint(self) -> str:
        return ("give this setup its own collection_prefix (every workspace of a namespace shares one "
                "collection), or delete the collection and re-index")

    @property
    def client(self) -> AsyncQdrantClient:
        assert self._client is not None
        return self._client

    async def _drop(self) -> None:
        from qdrant_client import models

        await self._call(
            "drop",
            self.client.delete(
                self.collection_name,
                points_selector=models.FilterSelector(filter=self._filter()),
                wait=True,
            ),
        )

    # -- writes ----------------------------------------------------------------------

    async def _upsert(
        self, ids: list[str], vectors: np.ndarray, metadata: list[dict[str, JSONScalar]]
    ) -> None:
        from qdrant_client import models

        check_metadata(metadata)
        unit = unit_rows(vectors)
        points = [
            models.PointStruct(
                id=point_id(self.workspace, id_),
                vector=unit[n].tolist(),
                payload={**metadata[n], ID_KEY: id_, WORKSPACE_KEY: self.workspace},
            )
            for n, id_ in enumerate(ids)
        ]
        step = self.options.batch_size
        for start in range(0, len(points), step):
            await self._call(
                "upsert",
                self.client.upsert(self.collection_name, points=points[start : start + step], wait=True),
            )

    async def _delete(self, ids: list[str]) -> None:
        from qdrant_client import models

        unique = [point_id(self.workspace, i) for i in ids]
        step = self.options.batch_size
        for start in range(0, len(unique), step):
            await self._call(
                "delete",
                self.client.delete(
                    self.collection_name,
                    points_selector=models.PointIdsList(points=unique[start : start + step]),
                    wait=True,
                ),
            )

    # -- reads -------------------------------------------------------------------------

    async def _count(self) -> int:
        got = await self._call(
            "count", self.client.count(self.collection_name, count_filter=self._filter(), exact=True)
        )
        return got.count

    async def _ids(self) -> AsyncIterator[str]:
        offset = None
        while True:
            points, offset = await self._call(
                "ids",
                self.client.scroll(
                    self.collection_name,
                    scroll_filter=self._filter(),
                    limit=self.options.batch_size,
                    offset=offset,
                    with_payload=[ID_KEY],
                    with_vectors=False,
                ),
            )
            for point in points:
                yield point.payload[ID_KEY]
            if offset is None:
                return

    async def _records(self, batch: int) -> AsyncIterator[dict[str, tuple[list[float], dict[str, Any]]]]:
        # The ids scan's scroll, with vectors and payloads: one request per page.
        offset = None
        while True:
            points, offset = await self._call(
                "records",
                self.client.scroll(
                    self.collection_name,
                    scroll_filter=self._filter(),
                    limit=batch,
                    offset=offset,
                    with_payload=True,
                    with_vectors=True,
                ),
            )
            yield {
                p.payload[ID_KEY]: (list(p.vector), _user_metadata(p.payload))  # type: ignore[arg-type,index]
                for p in points
            }
            if offset is None:
                return

    async def _get(self, ids: list[str]) -> dict[str, tuple[list[float], dict[str, Any]]]:
        found: dict[str, tuple[list[float], dict[str, Any]]] = {}
        step = self.options.batch_size
        for start in range(0, len(ids), step):
            points = await self._call(
                "get",
                self.client.retrieve(
                    self.collection_name,
                    ids=[point_id(self.workspace, i) for i in ids[start : start + step]],
                    with_payload=True,
                    with_vectors=True,
                ),
            )
            for point in points:
                payload = dict(point.payload or {})
                if payload.get(WORKSPACE_KEY) != self.workspace:
                    continue
                found[payload[ID_KEY]] = (list(point.vector), _user_metadata(payload))  # type: ignore[arg-type]
        return found

    async def _query(
        self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None
    ) -> list[VectorHit]:
        from qdrant_client import models

        flt = to_filter(filter, self.workspace)
        if flt is NO_MATCH:
            return []
        q_unit = unit.astype(np.float32).tolist()
        params = None
        if self.mode == "server":
            params = models.SearchParams(hnsw_ef=self.options.hnsw_ef, exact=self.options.exact)

        async def search(n: int) -> list[VectorHit]:
            got = await self._call(
                "query",
                self.client.query_points(
                    self.collection_name, query=q_unit, query_filter=flt, search_params=params,
                    limit=n, with_payload=True,
                ),
            )
            return [
                VectorHit(
                    id=p.payload[ID_KEY],
                    score=min(1.0, max(-1.0, float(p.score))),
                    metadata=_user_metadata(p.payload),
                )
                for p in got.points
            ]

        return await search_past_ties(search, top_k, min_score)


def _user_metadata(payload: Mapping[str, Any]) -> dict[str, JSONScalar]:
    return {k: v for k, v in payload.items() if k not in (ID_KEY, WORKSPACE_KEY)}
