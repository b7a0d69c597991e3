"""The default vector store: exact cosine search over an in-memory numpy matrix.

Layout in memory: a float32 matrix of the vectors as given (so ``get`` returns
them unchanged), their float64 norms, the float32 inverse norms used to turn dot
products into cosines, a row -> id list, a row -> metadata list and an
id -> row dict. Deleted rows are only marked dead; the matrix is compacted
when more than half of it is dead; a snapshot holds the live rows only.

On disk, in ``<working_dir>/<workspace>/vectors/``:

``<namespace>.npz``, the snapshot, replaced atomically: the ``vectors`` array
and a ``header`` array holding the UTF-8 JSON ``{"format", "dimension",
"embedder", "generation", "ids", "metadata"}`` (files written before journals
existed have no ``generation``: it is 0; before embedders were recorded, no
``embedder``).

``<namespace>.npz.journal``, the changes flushed since that snapshot: one framed
record per ``flush()`` (framing, generations and compaction are described in
:mod:`ragkit.storage.snapshot_journal`), each laid out as::

    header length (uint32 LE) | header: UTF-8 JSON {"dimension", "embedder", "ids", "metadata", "deleted"}
    | the vectors of "ids", float32 LE, row-major

holding the current vector and metadata of every id upserted since the previous
flush and the ids deleted since. ``close()`` folds the journal into a new snapshot
(only after this process wrote, and under the writer lock when
:class:`ragkit.core.stores.Stores` manages the store).

A file of another dimension than the configured one (another embedder made it)
is loaded in its own dimension: ids are counted, listed and deleted, while
vectors are neither read nor written (``VectorStore.check_stored``).
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np

from ragkit.errors import StoreError
from ragkit.protocols.base import Capability, StoreConfig
from ragkit.protocols.vector import Filter, VectorStore, matches_filter
from ragkit.schema import JSONScalar, VectorHit
from ragkit.storage.snapshot_journal import JournaledFile, JournaledStore, Writer, json_array, json_object

FORMAT = "ragkit.numpy-vectors/1"
_TIE = 2e-6  # candidates this close to the k-th score may tie with it after rounding
_MIN_CAPACITY = 64
_EXTREME_HI = 1e18
_EXTREME_LO = 1e-18
_LENGTH = struct.Struct("<I")
_JOURNAL_DTYPE = np.dtype("<f4")
THREAD_ROWS = 20_000
"""From this many rows on, a search runs in a worker thread (its matrix product
releases the GIL; a filter's scan of every row's metadata is pure Python):
milliseconds to a second that the event loop's other requests need not wait."""


def _dumps(data: object) -> bytes:
    return json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _loads(data: bytes) -> Any:
    # Lone surrogates passed through: files written before [vector.metadata.unicode] may hold them.
    return json.loads(data.decode("utf-8", "surrogatepass"))


def _array(items: list[object]) -> bytes:
    return json_array(items, _dumps, b", ")


def _row_norms(matrix: np.ndarray) -> np.ndarray:
    """Euclidean norm of each row, in float64 (no overflow for any float32 input)."""
    m64 = matrix.astype(np.float64)
    return np.sqrt(np.einsum("ij,ij->i", m64, m64))


def _inverse(norms: np.ndarray) -> np.ndarray:
    """float32 inverse norms; those of the tiniest vectors overflow to inf,
    which ``_search`` scores again in float64 (so no warning)."""
    with np.errstate(over="ignore"):
        return (1.0 / norms).astype(np.float32)


class NumpyVectorStore(JournaledStore, VectorStore):
    """Exact (brute-force) cosine search; persisted to one ``.npz`` snapshot per
    namespace and a journal of the changes (keyed by id) flushed since."""

    name: ClassVar[str] = "numpy"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT, Capability.METADATA_FILTER, Capability.CONCURRENT_WRITES}
    )

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self._dim = self.dimension
        """The dimension of the vectors in memory: the file's, else the configured one."""
        self._file: JournaledFile[str] = JournaledFile(self.path, "vector")
        self._reset_memory()

    @property
    def path(self) -> Path:
        return Path(self.config.working_dir) / self.workspace / "vectors" / f"{self.namespace}.npz"

    # -- memory layout ---------------------------------------------------------

    def where(self) -> str:
        return f"vector file {self.path}"

    def drop_hint(self) -> str:
        return f"drop the store (delete {self.path} and {self._file.journal.name}) and re-index"

    def _reset_memory(self, capacity: int = 0) -> None:
        d = self._dim
        self._vecs = np.empty((capacity, d), dtype=np.float32)
        self._norms = np.empty(capacity, dtype=np.float64)
        self._inv = np.empty(capacity, dtype=np.float32)
        self._alive = np.zeros(capacity, dtype=bool)
        self._row_ids: list[str | None] = []
        self._row_meta: list[dict[str, JSONScalar] | None] = []
        self._index: dict[str, int] = {}
        self._n = 0  # rows in use (alive or dead)
        self._dead = 0

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        cap = self._vecs.shape[0]
        if need <= cap:
            return
        new_cap = max(need, cap + cap // 2, _MIN_CAPACITY)
        for attr in ("_vecs", "_norms", "_inv", "_alive"):
            old = getattr(self, attr)
            new = (
                np.zeros((new_cap,) + old.shape[1:], dtype=old.dtype)
                if attr == "_alive"
                else np.empty((new_cap,) + old.shape[1:], dtype=old.dtype)
            )
            new[: self._n] = old[: self._n]
            setattr(self, attr, new)

    def _compact(self) -> None:
        if not self._dead:
            return
        keep = np.flatnonzero(self._alive[: self._n])
        k = len(keep)
        self._vecs[:k] = self._vecs[keep]
        self._norms[:k] = self._norms[keep]
        self._inv[:k] = self._inv[keep]
        self._alive[:k] = True
        self._alive[k : self._n] = False
        self._row_ids = [self._row_ids[i] for i in keep]
        self._row_meta = [self._row_meta[i] for i in keep]
        self._index = {id_: row for row, id_ in enumerate(self._row_ids)}  # type: ignore[misc]
        self._n = k
        self._dead = 0
        # Give memory back after large deletions.
        if self._vecs.shape[0] > 4 * max(k, _MIN_CAPACITY):
            cap = max(2 * k, _MIN_CAPACITY)
            self._vecs = self._vecs[:cap].copy()
            self._norms = self._norms[:cap].copy()
            self._inv = self._inv[:cap].copy()
            self._alive = self._alive[:cap].copy()

    # -- lifecycle -------------------------------------------------------------

    async def _open(self) -> None:
        await self._file.writable()  # a reload (refresh, a lost lock) replaces what a save may be reading
        self._made_by(self.dimension, self.config.embedder)
        self._reset_memory()
        try:
            self._file.load(self._read_snapshot, self._apply_changes)
        except BaseException:
            self._reset_memory()
            raise

    def _read_snapshot(self) -> int:
        """Load the snapshot into the (empty) memory layout; returns its generation."""
        try:
            with np.load(self.path, allow_pickle=False) as data:
                header = _loads(bytes(data["header"]))
                vectors = np.asarray(data["vectors"], dtype=np.float32)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise StoreError(
                f"cannot read vector file {self.path}: {exc}; restore it from a backup, or "
                f"delete it and its journal {self._file.journal.name} (if any) and re-index"
            ) from exc
        dim = int(header.get("dimension", vectors.shape[1] if vectors.ndim == 2 else -1))
        if vectors.ndim != 2 or vectors.shape[1] != dim:
            raise StoreError(f"vector file {self.path} is inconsistent (its vectors are not of its dimension {dim})")
        ids: list[str] = header["ids"]
        if ids:
            self._made_by(dim, header.get("embedder"))
        else:  # an emptied store takes any embedder's vectors
            vectors = vectors.reshape(0, self._dim)
        metadata: list[dict[str, JSONScalar]] = header["metadata"]
        if not (len(ids) == len(metadata) == vectors.shape[0]):
            raise StoreError(f"vector file {self.path} is inconsistent (ids/metadata/vectors)")
        n = len(ids)
        self._reset_memory(max(n, _MIN_CAPACITY))
        self._vecs[:n] = vectors
        norms = _row_norms(vectors)
        self._norms[:n] = norms
        self._inv[:n] = _inverse(norms)
        self._alive[:n] = True
        self._row_ids = list(ids)
        self._row_meta = list(metadata)
        self._index = {id_: row for row, id_ in enumerate(ids)}
        self._n = n
        return int(header.get("generation", 0))

    def _apply_changes(self, payload: bytes) -> None:
        """Replay one journal record (see the module docstring)."""
        (size,) = _LENGTH.unpack_from(payload)
        end = _LENGTH.size + size
        header = _loads(payload[_LENGTH.size : end])
        vectors = np.frombuffer(payload, dtype=_JOURNAL_DTYPE, offset=end)
        ids, metadata = header["ids"], header["metadata"]
        if ids and not self._index and header["dimension"] != self._dim:  # the first vectors: their dimension
            self._made_by(header["dimension"], header.get("embedder"))
            self._reset_memory()
        if header["dimension"] != self._dim or len(vectors) != len(ids) * self._dim:
            raise ValueError("a record's vectors do not match its ids and dimension")
        if len(metadata) != len(ids):
            raise ValueError("a record's metadata do not match its ids")
        self._remove(header["deleted"])
        if ids:
            matrix = vectors.reshape(len(ids), self._dim).astype(np.float32)
            self._put(ids, matrix, metadata)

    def _encode_changes(self, ids: list[str]) -> bytes:
        """A journal record of the current vector and metadata of the changed
        ids (in a worker thread, writes waiting: ``JournaledFile.save``)."""
        live = [id_ for id_ in ids if id_ in self._index]
        rows = [self._index[id_] for id_ in live]
        header = json_object(
            {
                "dimension": _dumps(self._dim),
                "embedder": _dumps(self.stored_embedder),
                "ids": _array(live),  # type: ignore[arg-type]
                "metadata": _array([self._row_meta[row] for row in rows]),
                "deleted": _array([id_ for id_ in ids if id_ not in self._index]),  # type: ignore[arg-type]
            }
        )
        vectors = self._vecs[rows].astype(_JOURNAL_DTYPE, copy=False)
        return _LENGTH.pack(len(header)) + header + vectors.tobytes()

    def _snapshot(self, generation: int) -> Writer:
        """A copy of the live rows and a writer for the npz file (in a worker
        thread, writes waiting: ``JournaledFile.save``; it only reads, so dead
        rows are skipped here rather than compacted away)."""
        n = self._n
        if self._dead:
            keep = np.flatnonzero(self._alive[:n])
            vectors = self._vecs[keep]
            ids, metadata = [self._row_ids[i] for i in keep.tolist()], [self._row_meta[i] for i in keep.tolist()]
        else:
            vectors, ids, metadata = self._vecs[:n].copy(), self._row_ids[:n], self._row_meta[:n]
        header = json_object(
            {
                "format": _dumps(FORMAT),
                "dimension": _dumps(self._dim),
                "embedder": _dumps(self.stored_embedder),
                "generation": _dumps(generation),
                "ids": _array(ids),  # type: ignore[arg-type]
                "metadata": _array(metadata),  # type: ignore[arg-type]
            }
        )
        header_arr = np.frombuffer(header, dtype=np.uint8)

        def write(fh: BinaryIO) -> None:
            np.savez(fh, vectors=vectors, header=header_arr)

        return write

    def _made_by(self, dimension: int, embedder: str | None) -> None:
        """Whose vectors are in memory: the configured embedder's, or those a file holds."""
        self._dim = dimension
        self.stored_embedder = embedder
        self.stored_dimension = None if dimension == self.dimension else dimension

    def _forget(self) -> None:
        self._made_by(self.dimension, self.config.embedder)
        self._reset_memory()

    async def _drop(self) -> None:
        await self._file.writable()
        self._made_by(self.dimension, self.config.embedder)
        self._reset_memory()
        await self._file.delete()

    # -- writes ----------------------------------------------------------------

    async def _upsert(
        self, ids: list[str], vectors: np.ndarray, metadata: list[dict[str, JSONScalar]]
    ) -> None:
        await self._file.writable()  # a save may be reading the rows in its thread
        if not self._index:  # the store's first vectors: the configured embedder makes them
            self.stored_embedder = self.config.embedder
        self._put(ids, vectors, metadata)
        self._file.touch(ids)

    def _put(self, ids: list[str], matrix: np.ndarray, metas: list[dict[str, JSONScalar]]) -> None:
        """Write validated rows (new ids get new rows; known ids are overwritten)."""
        norms = _row_norms(matrix)
        rows = np.empty(len(ids), dtype=np.int64)
        new_positions = []
        for pos, id_ in enumerate(ids):
            row = self._index.get(id_)
            if row is None:
                new_positions.append(pos)
            else:
                rows[pos] = row
        if new_positions:
            self._reserve(len(new_positions))
            start = self._n
            for offset, pos in enumerate(new_positions):
                row = start + offset
                rows[pos] = row
                self._index[ids[pos]] = row
                self._row_ids.append(ids[pos])
                self._row_meta.append(None)
            self._n = start + len(new_positions)
        self._vecs[rows] = matrix
        self._norms[rows] = norms
        self._inv[rows] = _inverse(norms)
        self._alive[rows] = True
        for pos, row in enumerate(rows.tolist()):
            self._row_meta[row] = metas[pos]

    async def _delete(self, ids: list[str]) -> None:
        await self._file.writable()
        self._file.touch(self._remove(ids))

    def _remove(self, ids: Iterable[str]) -> list[str]:
        """Mark the rows of ``ids`` dead; returns the ids that were there."""
        removed = []
        for id_ in ids:
            row = self._index.pop(id_, None) if isinstance(id_, str) else None
            if row is None:
                continue
            self._alive[row] = False
            self._row_ids[row] = None
            self._row_meta[row] = None
            self._dead += 1
            removed.append(id_)
        if self._dead > 1024 and self._dead * 2 > self._n:
            self._compact()
        return removed

    # -- reads -----------------------------------------------------------------

    async def _count(self) -> int:
        return len(self._index)

    async def _ids(self) -> AsyncIterator[str]:
        for id_ in list(self._index):  # a snapshot: safe while others write
            yield id_

    async def _get(self, ids: list[str]) -> dict[str, tuple[np.ndarray, dict[str, JSONScalar]]]:
        rows = ((id_, self._index.get(id_)) for id_ in ids)
        return {id_: (self._vecs[row], self._row_meta[row] or {}) for id_, row in rows if row is not None}

    async def _query(
        self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None
    ) -> list[VectorHit]:
        if self._n < THREAD_ROWS:
            return self._search(unit, top_k, filter, min_score)
        # Writes wait for the thread: the rows it reads stay where they are.
        return await self._file.read_in_thread(lambda: self._search(unit, top_k, filter, min_score))

    def _search(self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None) -> list[VectorHit]:
        n = self._n
        if not self._index:
            return []
        q_unit = unit.astype(np.float32)

        # Candidate rows: alive, and matching the filter if any.
        if filter:
            mask = np.fromiter(
                (m is not None and matches_filter(m, filter) for m in self._row_meta[:n]),
                dtype=bool,
                count=n,
            )
            rows = np.flatnonzero(mask)
        elif self._dead:
            rows = np.flatnonzero(self._alive[:n])
        else:
            rows = None
        if rows is not None and len(rows) == 0:
            return []

        with np.errstate(over="ignore", invalid="ignore"):  # fixed up below
            if rows is None:
                scores = self._vecs[:n] @ q_unit
                scores *= self._inv[:n]
                rows = np.arange(n)
            elif len(rows) * 2 >= n:
                scores = self._vecs[:n] @ q_unit
                scores *= self._inv[:n]
                scores = scores[rows]
            else:
                scores = (self._vecs[rows] @ q_unit) * self._inv[rows]

        # Vectors of extreme magnitude lose precision (or overflow) in the float32
        # product; score those few rows again in float64.
        norms = self._norms[rows]
        extreme = (norms > _EXTREME_HI) | (norms < _EXTREME_LO) | ~np.isfinite(scores)
        if extreme.any():
            ext_rows = rows[extreme]
            exact = (self._vecs[ext_rows].astype(np.float64) @ unit) / self._norms[ext_rows]
            scores = scores.astype(np.float64)
            scores[extreme] = exact
        np.clip(scores, -1.0, 1.0, out=scores)

        if min_score is not None:
            keep = scores >= min_score
            scores, rows = scores[keep], rows[keep]
        if len(scores) > top_k:
            part = np.argpartition(-scores, top_k - 1)[:top_k]
            kth = scores[part].min()
            near = np.flatnonzero(scores >= kth - _TIE)
            scores, rows = scores[near], rows[near]

        # Ranked here too, so that only top_k hits are built even when many tie.
        ranked = sorted(
            zip(scores.tolist(), rows.tolist()),
            key=lambda sr: (-round(sr[0], 6), self._row_ids[sr[1]]),
        )[:top_k]
        return [
            VectorHit(
                id=self._row_ids[row],  # type: ignore[arg-type]
                score=score,
                metadata=dict(self._row_meta[row] or {}),
            )
            for score, row in ranked
        ]

