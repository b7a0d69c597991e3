"""Vector store protocol."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragkit.errors import DimensionMismatchError, InvalidValueError
from ragkit.protocols.base import KeyedStore, StoreConfig, in_order, storable_key, template, unique_keys, valid_unicode
from ragkit.schema import JSONScalar, VectorHit, VectorRecord

Filter = Mapping[str, Any]


class VectorStore(KeyedStore):
    """Vectors of a fixed dimension with scalar metadata, searched by cosine.

    Semantics every adapter must follow (the contract suite checks each):

    - [vector.dimension.fixed] ``dimension`` is fixed by ``StoreConfig.dimension``.
      Upserting or querying a vector of any other length raises
      ``DimensionMismatchError`` and writes nothing. [vector.dimension.lazy] A
      store holding vectors of another dimension (made by another embedder)
      opens, counts, lists and deletes ids; ``upsert``, ``query`` and ``get``
      raise ``DimensionMismatchError`` naming the embedder recorded in the
      store (``stored_embedder``) and the fix. Adapters set
      ``stored_dimension`` and ``stored_embedder`` when they open. [vector.vectors.valid]
      Vectors must be finite and non-zero (``InvalidValueError``), and ids in one
      upsert distinct.
    - [vector.metadata.scalars] Metadata values are scalars: str, int, float or
      bool, read back with their type. [vector.metadata.unicode] A key or str
      value holding a lone surrogate (not valid Unicode, so not UTF-8) raises
      ``InvalidValueError`` and writes nothing, as a KV record's would.
    - [vector.upsert.replaces] ``upsert`` replaces the vector *and* metadata of
      an existing id.
    - [vector.query.ranking] ``query(vector, top_k)`` returns hits sorted by
      cosine similarity, best first; equal scores (within 1e-6) are ordered by
      id ascending.
    - [vector.query.top-k] At most ``top_k`` hits; ``top_k`` larger than the
      store returns everything; ``top_k=0`` returns ``[]`` (it is not "no
      limit") and a negative or non-int ``top_k`` raises ``InvalidValueError``.
    - [vector.query.min-score-inclusive] ``min_score`` drops hits whose score is
      below it; a hit scoring exactly ``min_score`` is kept (``>=``, never ``>``),
      also when the adapter pushes ``min_score`` down to its backend.
    - [vector.filter.semantics] ``filter`` (needs ``Capability.METADATA_FILTER``)
      is a mapping ``{field: value}`` or ``{field: {"$in": [v1, v2]}}``; all
      entries must hold (AND), before ``top_k`` is applied. A record without
      the field never matches.
    - [vector.filter.types] Filter values compare with their type: a str never
      equals a number (``"1"`` does not match ``1``), a bool only equals a bool
      (``True`` does not match ``1``), and numbers compare by value (``3``
      matches ``3.0`` and ``3.0`` matches ``3``), as Python's ``==`` on
      non-bool numbers.
    - [vector.scores.cosine] Scores are cosine similarity in [-1, 1] with at
      least 1e-4 precision, so scores from two adapters of the same data are
      comparable.
    - [vector.search.recall] Exact stores return the true nearest neighbours;
      stores declaring ``Capability.APPROXIMATE_SEARCH`` must reach recall@10 >=
      0.9 against brute force on the contract's data set.
    - [vector.get.order] ``get(ids)`` returns one entry per id in order, ``None``
      where missing.
    - [vector.ids.once] ``ids()`` yields every id once;
      [store.scan.complete-under-delete] holds for it.
    - [vector.records.pages] ``records(batch)`` yields every stored id once,
      with the vector and metadata ``get`` gives for it, in non-empty lists of
      at most ``batch`` records: how a migration copies stored embeddings
      without embedding again, in memory bounded by ``batch``.
    - [store.delete.missing-ok] ``delete`` ignores missing ids;
      [store.keys.exact] and [store.batch.large] hold for ids.

    Adapters implement the hooks ``_upsert``, ``_query``, ``_get``, ``_delete``,
    ``_count``, ``_ids`` and ``_drop`` (``_records`` optionally: by default it
    pages ``_ids`` and reads each page with ``_get``; override it to read a
    page in one backend call); the public methods check the store is
    open, validate the vectors, metadata, ``top_k`` and filter, and apply
    ``min_score`` and the ranking rule to what ``_query`` returns.
    """

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        if config.dimension is None:
            raise InvalidValueError(
                f"{type(self).__name__} needs StoreConfig.dimension (the embedder's dimension)"
            )

    stored_dimension: int | None = None
    """The dimension of the vectors the store holds (``None``: empty, or the same as configured)."""
    stored_embedder: str | None = None
    """The embedder that made them, as recorded in the store (``None``: not recorded)."""

    @property
    def dimension(self) -> int:
        assert self.config.dimension is not None
        return self.config.dimension

    def where(self) -> str:
        """Where the store keeps its vectors, for error messages (adapters name their file or collection)."""
        return f"vector store {self.workspace}/{self.namespace}"

    def drop_hint(self) -> str:
        return "drop the store and re-index"

    def check_stored(self) -> None:
        """Vectors are read or written only with the embedder that made the store's."""
        if self.stored_dimension is None or self.stored_dimension == self.dimension:
            return
        made_by = (f"the embedder {self.stored_embedder}" if self.stored_embedder
                   else "an embedder it did not record (written before ragkit recorded it)")
        configured = self.config.embedder or "the configured embedder"
        raise DimensionMismatchError(
            f"{self.where()} holds vectors of dimension {self.stored_dimension} made by {made_by}, "
            f"but {configured} makes vectors of dimension {self.dimension}: configure the embedder "
            "that made the store ([embedder] name and options in ragkit.toml, or RAGKIT_EMBEDDER), "
            f"or {self.drop_hint()}"
        )

    @template("_upsert")
    async def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray | Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, JSONScalar]] | None = None,
    ) -> None:
        """Insert or replace ``len(ids)`` vectors (rows of ``vectors``)."""
        self._check_open()
        self.check_stored()
        checked = self.check_upsert(ids, vectors, metadata)
        if checked is not None:
            await self._fenced()
            await self._upsert(*checked)

    @template("_query")
    async def query(
        self,
        vector: np.ndarray | Sequence[float],
        top_k: int,
        *,
        filter: Filter | None = None,
        min_score: float | None = None,
    ) -> list[VectorHit]:
        """Nearest stored vectors by cosine similarity, best first."""
        self._check_open()
        self.check_stored()
        q = self.check_query_args(vector, top_k).astype(np.float64)
        check_filter(filter)
        if top_k == 0:
            return []
        hits = await self._query(q / np.linalg.norm(q), int(top_k), filter or None, min_score)
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        return rank_hits(hits, int(top_k))

    @template("_get")
    async def get(self, ids: Sequence[str]) -> list[VectorRecord | None]:
        """Stored vectors and metadata, same order as ``ids``."""
        self._check_open()
        self.check_stored()
        ids = list(ids)
        wanted = unique_keys(ids)
        return self.records_in_order(ids, await self._get(wanted) if wanted else {})

    @template("_ids")
    def ids(self) -> AsyncIterator[str]:
        """Every stored id once, any order."""
        self._check_open()
        return self._while_open(self._ids())

    @template("_records")
    def records(self, batch: int = 256) -> AsyncIterator[list[VectorRecord]]:
        """Every stored vector with its metadata, ``batch`` at most at a time
        ([vector.records.pages]). Every store can answer it (the default hook
        reads ``ids()`` and ``get``), so no capability gates it."""
        self._check_open()
        self.check_stored()
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidValueError(f"records needs batch >= 1, got {batch!r}")
        return self._while_open(self._record_pages(batch))

    async def _record_pages(self, batch: int) -> AsyncIterator[list[VectorRecord]]:
        async for found in self._records(batch):
            page = [r for r in self.records_in_order(list(found), found) if r is not None]
            for start in range(0, len(page), batch):  # an adapter's page may be larger than asked
                yield page[start : start + batch]

    # -- hooks ----------------------------------------------------------------------

    async def _records(self, batch: int) -> AsyncIterator[Mapping[str, tuple[Any, Mapping[str, Any]]]]:
        """Pages of ``{id: (vector, metadata)}`` covering every stored id once
        (an async generator). The default reads ``_ids()`` ``batch`` at a time
        and ``_get`` each page (ids deleted in between are left out); a backend
        that returns vectors with a scan (a scroll, a keyset ``SELECT``) should
        override it with one call per page."""
        page: list[str] = []
        async for id_ in self._ids():
            page.append(id_)
            if len(page) == batch:
                yield await self._get(page)
                page = []
        if page:
            yield await self._get(page)

    @abstractmethod
    async def _upsert(
        self, ids: list[str], vectors: np.ndarray, metadata: list[dict[str, JSONScalar]]
    ) -> None:
        """Write validated rows: distinct ids, a finite non-zero float32 matrix of
        this dimension, plain-scalar metadata; at least one row."""

    @abstractmethod
    async def _query(
        self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None
    ) -> list[VectorHit]:
        """At least the ``top_k`` best hits for the unit (float64) query vector,
        honouring ``filter`` (already checked). Extra hits, hits below
        ``min_score`` and any order are fine: the caller cuts and ranks. Exact
        stores must return every hit tying with the k-th (see ``search_past_ties``
        for search APIs that return a fixed number)."""

    @abstractmethod
    async def _get(self, ids: list[str]) -> Mapping[str, tuple[Any, Mapping[str, Any]]]:
        """``{id: (vector, metadata)}`` of the stored ones among ``ids``."""

    @abstractmethod
    def _ids(self) -> AsyncIterator[str]:
        """Every stored id once, any order (an async generator)."""

    # -- validation shared by adapters, so all of them reject the same input --

    def check_matrix(self, ids: Sequence[str], vectors: Any) -> np.ndarray:
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim == 1 and len(ids) == 1:
            matrix = matrix.reshape(1, -1)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise InvalidValueError(
                f"expected {len(ids)} vectors as an (n, {self.dimension}) matrix, "
                f"got shape {matrix.shape}"
            )
        if len(ids) and matrix.shape[1] != self.dimension:
            raise DimensionMismatchError(
                f"vectors have dimension {matrix.shape[1]} but store "
                f"{self.workspace}/{self.namespace} has dimension {self.dimension}; "
                "use the same embedder that created the store, or drop it and re-index"
            )
        if not np.isfinite(matrix).all():
            raise InvalidValueError("vectors must be finite (no NaN or infinity)")
        if len(ids) and (np.linalg.norm(matrix.astype(np.float64), axis=1) == 0).any():
            raise InvalidValueError("zero vectors have no direction; cosine is undefined")
        for i in ids:
            if not storable_key(i):
                raise InvalidValueError(
                    f"vector ids must be non-empty strings of valid Unicode, got {i!r}"
                )
        if len(set(ids)) != len(ids):
            raise InvalidValueError("duplicate ids in one upsert")
        return matrix

    def check_query_args(self, vector: Any, top_k: Any) -> np.ndarray:
        """``check_query`` plus ``top_k``: an int >= 0 (booleans are not ints here)."""
        q = self.check_query(vector)
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
            raise InvalidValueError(f"top_k must be an int, got {top_k!r}")
        if top_k < 0:
            raise InvalidValueError(f"top_k must be >= 0, got {top_k}")
        return q

    def check_upsert(
        self, ids: Sequence[str], vectors: Any, metadata: Sequence[Mapping[str, Any]] | None
    ) -> tuple[list[str], np.ndarray, list[dict[str, JSONScalar]]] | None:
        """Validated (ids, matrix, metadata), or None for an empty upsert."""
        ids = list(ids)
        if not ids:
            if np.asarray(vectors).size:
                raise InvalidValueError("got vectors but no ids")
            return None
        with np.errstate(over="ignore"):  # huge-but-finite vectors are valid
            matrix = self.check_matrix(ids, vectors)
        return ids, matrix, self.check_metadata(len(ids), metadata)

    @staticmethod
    def records_in_order(
        ids: Sequence[Any], found: Mapping[str, tuple[Any, Mapping[str, Any]]]
    ) -> list[VectorRecord | None]:
        """``get``'s answer: a record per asked id, in order, None where missing."""
        rows = {i: (i, vec, meta) for i, (vec, meta) in found.items() if isinstance(i, str)}
        return in_order(
            list(ids), rows, lambda r: VectorRecord(id=r[0], vector=_floats(r[1]), metadata=dict(r[2]))
        )

    def check_query(self, vector: Any) -> np.ndarray:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dimension:
            raise DimensionMismatchError(
                f"query vector has dimension {q.shape[0]} but store "
                f"{self.workspace}/{self.namespace} has dimension {self.dimension}"
            )
        if not np.isfinite(q).all() or float(np.linalg.norm(q.astype(np.float64))) == 0.0:
            raise InvalidValueError("query vector must be finite and non-zero")
        return q

    @staticmethod
    def check_metadata(
        n: int, metadata: Sequence[Mapping[str, Any]] | None
    ) -> list[dict[str, JSONScalar]]:
        """Validated copies holding plain Python scalars (a numpy float64 is a
        float subclass: it becomes a float)."""
        if metadata is None:
            return [{} for _ in range(n)]
        if len(metadata) != n:
            raise InvalidValueError(f"got {len(metadata)} metadata entries for {n} vectors")
        out = []
        for meta in metadata:
            plain: dict[str, JSONScalar] = {}
            for key, value in meta.items():
                if not isinstance(key, str) or not isinstance(value, (str, int, float, bool)):
                    raise InvalidValueError(
                        f"metadata {key!r}={value!r}: values must be str, int, float or bool"
                    )
                if isinstance(value, float) and not math.isfinite(value):
                    raise InvalidValueError(f"metadata {key!r} must be finite")
                if not valid_unicode(key) or isinstance(value, str) and not valid_unicode(value):
                    raise InvalidValueError(
                        f"metadata {key[:40]!r} holds a lone surrogate (not valid Unicode); clean it first "
                        "(ragkit.core.text.clean)"
                    )
                plain[key] = _plain(value)
            out.append(plain)
        return out


def embedder_label(embedder: Any) -> str:
    """How a store records the embedder of its vectors: ``name (model_id)``."""
    name = getattr(type(embedder), "name", None) or type(embedder).__name__
    model_id = getattr(embedder, "model_id", None)
    return f"{name} ({model_id})" if model_id and model_id != name else str(name)


def _plain(value: JSONScalar) -> JSONScalar:
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    return int(value) if isinstance(value, int) else float(value)


def _floats(vector: Any) -> list[float]:
    return vector.tolist() if isinstance(vector, np.ndarray) else list(vector)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (computed in float64), as float32: what
    stores that keep normalised vectors send to their backend."""
    m64 = np.asarray(matrix, dtype=np.float64)
    if m64.ndim == 1:
        return (m64 / np.linalg.norm(m64)).astype(np.float32)
    return (m64 / np.sqrt(np.einsum("ij,ij->i", m64, m64))[:, None]).astype(np.float32)


TIE = 2e-6
"""Scores this close to the k-th may tie with it after ``rank_hits``' rounding."""


async def search_past_ties(
    search: Callable[[int], Awaitable[list[VectorHit]]],
    top_k: int,
    min_score: float | None,
    extra: int = 8,
) -> list[VectorHit]:
    """Hits of a backend search that returns the best ``n`` (``search(n)``),
    asked for ``2 * top_k + extra`` and then twice as many until no candidate
    past the cut could tie with the k-th hit, so ties are broken by id as the
    protocol says and not by the backend's order.

    Why twice ``top_k`` at first: scores that tie come in groups whose size
    grows with the depth of the cut (the lower the k-th score, the more records
    share it), so a fixed margin asks again more often at a larger ``top_k``.
    On the benchmark's hashing embedder, a margin of 8 asked again for 14 % of
    relation searches at ``top_k`` 10 and 34 % at 40; twice ``top_k`` for none
    (``docs/benchmarks.md``, issue 28). A server returns ids and scores, so
    the extra rows cost little next to a second round trip."""
    fetch = 2 * top_k + extra
    while True:
        hits = await search(fetch)
        kept = [h for h in hits if min_score is None or h.score >= min_score]
        if len(hits) < fetch or len(kept) < top_k:
            return kept  # every eligible record came back, or min_score cut the rest
        kth = sorted((h.score for h in kept), reverse=True)[top_k - 1]
        if not min(h.score for h in hits) >= kth - TIE:
            return kept
        fetch *= 2


def matches_filter(metadata: Mapping[str, Any], filter: Filter | None) -> bool:
    """Reference semantics of ``filter`` (adapters may translate it natively)."""
    if not filter:
        return True
    for field, cond in filter.items():
        if field not in metadata:
            return False
        value = metadata[field]
        if isinstance(cond, Mapping):
            unknown = set(cond) - {"$in"}
            if unknown:
                raise InvalidValueError(
                    f"unsupported filter operator(s) {sorted(unknown)}; use {{'$in': [...]}}"
                )
            if not any(_same(value, c) for c in cond["$in"]):
                return False
        elif not _same(value, cond):
            return False
    return True


def _same(value: Any, expected: Any) -> bool:
    """Equality where booleans only equal booleans (Python says True == 1)."""
    return isinstance(value, bool) == isinstance(expected, bool) and value == expected


I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def in_values(field: str, cond: Mapping[str, Any]) -> list[Any]:
    """The values of a ``{"$in": [...]}`` condition, or a clear error for any
    other operator or a non-list operand (one rule for every adapter)."""
    unknown = set(cond) - {"$in"}
    if unknown:
        raise InvalidValueError(f"unsupported filter operator(s) {sorted(unknown)}; use {{'$in': [...]}}")
    values = cond.get("$in")
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidValueError(f"filter {field!r}: '$in' needs a list of values")
    return list(values)


def check_filter(filter: Filter | None) -> None:
    """Reject a malformed filter before any store work."""
    if filter is None:
        return
    if not isinstance(filter, Mapping):
        raise InvalidValueError(f"filter must be a mapping, got {type(filter).__name__}")
    for field, cond in filter.items():
        if isinstance(cond, Mapping):
            in_values(field, cond)


def storable_scalar(value: Any) -> bool:
    """A metadata value every database keeps with its type: a bool, a str, a
    64-bit int or a finite float (larger ints silently become floats in most)."""
    if isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return I64_MIN <= value <= I64_MAX
    return isinstance(value, float) and math.isfinite(value)


def rank_hits(hits: list[VectorHit], top_k: int) -> list[VectorHit]:
    """Sort best first with the protocol's tie rule (scores within 1e-6 tie, id asc)."""
    hits.sort(key=lambda h: (-round(h.score, 6), h.id))
    return hits[:top_k]
