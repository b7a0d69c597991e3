"""One deliberately broken adapter per protocol rule issue 19 added (and the
writer lock's and the doc-status generation's rules since): each subclasses a
reference adapter and breaks exactly the rule named by its ``violates``
attribute, the way a real backend tends to (a case-folding collation, an OFFSET scan, a ``>`` pushed down for
``min_score``, a lease renewed without comparing its owner...).
``tests/testing/test_rules_catch_broken.py`` runs the matching contract
against each and asserts that the tests checking that rule fail.

The model references here (``EchoLLM``, ``ScaledOverlapReranker``) are small
correct models with an output-changing option, so that breaking ``model_id``
is possible; they pass their whole contract themselves. None of these are
registered as plugins.
"""

from __future__ import annotations

import asyncio
import time
import unicodedata
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragkit.protocols.base import Capability, bypass_template
from ragkit.protocols.doc_status import _record
from ragkit.protocols.graph import EdgeKey, check_node_id, check_properties, edge_key
from ragkit.protocols.kv import encode_record
from ragkit.protocols.lease import Holder
from ragkit.models.http import model_identity
from ragkit.protocols.models import ChatRequest, Completion, ModelAdapter, Usage
from ragkit.protocols.vector import Filter
from ragkit.schema import DocStatusPage, VectorHit
from ragkit.storage.networkx_graph import NetworkXGraphStore
from ragkit.storage.numpy_vectors import NumpyVectorStore
from ragkit.storage.sqlite_doc_status import SQLiteDocStatusStore
from ragkit.storage.sqlite_kv import SQLiteKVStore
from ragkit.testing.doubles import HashEmbedder, OverlapReranker, words


def _fold(key: str) -> str:
    return unicodedata.normalize("NFKC", key).casefold().rstrip(" ")


# -- stores ------------------------------------------------------------------------------


class CaseFoldingKVStore(SQLiteKVStore):
    """Keys are stored case-folded and NFKC-normalised, without trailing
    spaces (a case-insensitive, normalising collation)."""

    violates: ClassVar[str] = "store.keys.exact"
    defect: ClassVar[str] = "keys differing in case/normalisation are one record"

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        found = await super()._get_many(list(dict.fromkeys(map(_fold, keys))))
        return {k: found[_fold(k)] for k in keys if _fold(k) in found}

    async def _upsert(self, records: dict[str, str]) -> None:
        await super()._upsert({_fold(k): v for k, v in records.items()})

    async def _delete(self, ids: list[str]) -> None:
        await super()._delete(list(dict.fromkeys(map(_fold, ids))))


class ParameterLimitKVStore(SQLiteKVStore):
    """Sends every batch as one statement and fails past 999 host
    parameters, as SQLite before 3.32 does ("too many SQL variables")."""

    violates: ClassVar[str] = "store.batch.large"
    defect: ClassVar[str] = "a call with more than 999 keys fails"

    @staticmethod
    def _limit(n: int) -> None:
        if n > 999:
            raise RuntimeError(f"too many SQL variables ({n} > 999)")

    async def _get_many(self, keys: list[str]) -> dict[str, str]:
        self._limit(len(keys))
        return await super()._get_many(keys)

    async def _delete(self, ids: list[str]) -> None:
        self._limit(len(ids))
        await super()._delete(ids)


class OffsetScanKVStore(SQLiteKVStore):
    """``keys()`` pages by offset (``LIMIT 100 OFFSET n``): keys deleted behind
    the scan shift the rest and the scan skips them."""

    violates: ClassVar[str] = "store.scan.complete-under-delete"
    defect: ClassVar[str] = "keys() pages by offset and skips keys when others are deleted"

    async def _keys(self) -> AsyncIterator[str]:
        offset = 0
        while True:
            page = sorted([k async for k in super()._keys()])[offset : offset + 100]
            for key in page:
                yield key
            if len(page) < 100:
                return
            offset += 100


class CloseOnlyDurableVectorStore(NumpyVectorStore):
    """``flush()`` does nothing: only ``close()`` writes the file."""

    violates: ClassVar[str] = "store.flush.durable"
    defect: ClassVar[str] = "flush() does not save; only close() does"

    async def _flush(self) -> None:
        return None


class ExclusiveMinScoreVectorStore(NumpyVectorStore):
    """Pushes ``min_score`` down as ``score > min_score`` (exclusive)."""

    violates: ClassVar[str] = "vector.query.min-score-inclusive"
    defect: ClassVar[str] = "a hit scoring exactly min_score is dropped"

    async def _query(self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None) -> list[VectorHit]:
        hits = await super()._query(unit, top_k, filter, min_score)
        return [h for h in hits if min_score is None or h.score > min_score]


class ZeroTopKIsUnlimitedVectorStore(NumpyVectorStore):
    """Replaces ``query`` and treats ``top_k=0`` as "no limit"."""

    violates: ClassVar[str] = "vector.query.top-k"
    defect: ClassVar[str] = "top_k=0 returns every record"

    @bypass_template("the defect: top_k=0 means no limit here")
    async def query(self, vector, top_k, *, filter=None, min_score=None):  # type: ignore[override]
        self._check_open()
        q = self.check_query_args(vector, top_k).astype(np.float64)
        k = top_k or max(await self.count(), 1)
        hits = await self._query(q / np.linalg.norm(q), k, filter, min_score)
        hits = [h for h in hits if min_score is None or h.score >= min_score]
        hits.sort(key=lambda h: (-round(h.score, 6), h.id))
        return hits[:k]


class StringlyFilterVectorStore(NumpyVectorStore):
    """Compares filter values as text (metadata kept as strings): ``"1"``
    matches ``1`` and ``3`` does not match ``3.0``."""

    violates: ClassVar[str] = "vector.filter.types"
    defect: ClassVar[str] = "filters compare str(value)"

    async def _query(self, unit: np.ndarray, top_k: int, filter: Filter | None, min_score: float | None) -> list[VectorHit]:
        hits = await super()._query(unit, max(await self.count(), 1), None, min_score)
        if not filter:
            return hits

        def ok(meta: Mapping[str, Any]) -> bool:
            for field, cond in filter.items():
                options = cond["$in"] if isinstance(cond, Mapping) else [cond]
                if field not in meta or str(meta[field]) not in {str(c) for c in options}:
                    return False
            return True

        return [h for h in hits if ok(h.metadata)]


class FirstWinsEdgesGraphStore(NetworkXGraphStore):
    """Replaces ``upsert_edges`` and keeps the *first* of an edge repeated in
    one batch (an ``INSERT ... ON CONFLICT DO NOTHING`` of the whole batch)."""

    violates: ClassVar[str] = "graph.upsert-edges.last-wins"
    defect: ClassVar[str] = "the first occurrence of an edge in one batch wins"

    @bypass_template("the defect: the first duplicate wins")
    async def upsert_edges(self, edges):  # type: ignore[override]
        self._check_open()
        checked: dict[EdgeKey, dict[str, Any]] = {}
        for a, b, props in edges:
            a, b = check_node_id(a), check_node_id(b)
            checked.setdefault(edge_key(a, b), check_properties(f"edge ({a!r}, {b!r})", props))
        if checked:
            await self._upsert_edges(checked)


class UnfencedKVStore(SQLiteKVStore):
    """Replaces ``upsert`` and forgets to ask the fence: a writer that lost
    the lock still writes through it."""

    violates: ClassVar[str] = "store.fence.checked"
    defect: ClassVar[str] = "upsert writes without asking the fence"

    @bypass_template("the defect: no fence check")
    async def upsert(self, records):  # type: ignore[override]
        self._check_open()
        encoded = {key: encode_record(key, value) for key, value in records.items()}
        if encoded:
            await self._upsert(encoded)


class SavesWhatItDiscardsGraphStore(NetworkXGraphStore):
    """Keeps writes until flush but has no ``_discard``: a writer that lost the
    lock saves them at close, over the next writer's work."""

    violates: ClassVar[str] = "store.discard.unflushed"
    defect: ClassVar[str] = "discard() and a lost lock's close() keep unsaved writes"

    async def _discard(self) -> None:
        pass


class ExtraEmptyPageDocStatusStore(SQLiteDocStatusStore):
    """Replaces ``list_page``: asks for ``limit`` rows and sets a cursor
    whenever the page is full, so a listing whose size is a multiple of the
    limit ends with an extra empty page."""

    violates: ClassVar[str] = "doc_status.list-page.last-page"
    defect: ClassVar[str] = "a full last page has a next_cursor (then an empty page)"

    @bypass_template("the defect: no limit + 1 look-ahead")
    async def list_page(self, status=None, limit: int = 100, cursor: str | None = None) -> DocStatusPage:  # type: ignore[override]
        self._check_open()
        items = [_record(data) for data in await self._list_page(status, limit, cursor)]
        return DocStatusPage(items=items, next_cursor=items[-1].id if len(items) == limit else None)


class DeleteKeepsGenerationDocStatusStore(SQLiteDocStatusStore):
    """Bumps the generation on upserts and drops but not on deletes: a reader
    keeps showing a deleted document."""

    violates: ClassVar[str] = "doc_status.generation.every-write"
    defect: ClassVar[str] = "delete() leaves the generation as it was"
    _deleting = False

    async def _delete(self, ids: list[str]) -> None:
        self._deleting = True
        try:
            await super()._delete(ids)
        finally:
            self._deleting = False

    def wrote(self, conn: Any) -> None:
        if not self._deleting:
            super().wrote(conn)


class InstanceGenerationDocStatusStore(SQLiteDocStatusStore):
    """Counts its own writes in memory: another connection or process never
    sees them, and a reopened store starts again from 0."""

    violates: ClassVar[str] = "doc_status.generation.shared"
    defect: ClassVar[str] = "the generation lives in the instance, not in the backend"
    _written = 0

    async def _generation(self) -> int:
        return self._written

    def wrote(self, conn: Any) -> None:
        self._written += 1


class NoTombstoneDocStatusStore(SQLiteDocStatusStore):
    """Reads its change feed from the records' generation column alone: a
    deleted document leaves no row, so no reader learns it is gone."""

    violates: ClassVar[str] = "doc_status.changes.tombstones"
    defect: ClassVar[str] = "changes_since() never names a deleted id"

    async def _changed_since(self, generation: int) -> tuple[int, list[str]] | None:
        now = await self._generation()
        rows = self.db.fetchall(f"SELECT id {self._where(' AND generation > ?')}", (*self._scope, generation))
        return now, [id for (id,) in rows]


class InclusiveChangesDocStatusStore(SQLiteDocStatusStore):
    """Selects ids written *at or after* the generation asked (``>=``): each
    reader applies the last write it already had once more, and a write is in
    the feed one generation too early."""

    violates: ClassVar[str] = "doc_status.changes.every-write"
    defect: ClassVar[str] = "changes_since(g) also names the writes made at g"

    async def _changed_since(self, generation: int) -> tuple[int, list[str]] | None:
        return await super()._changed_since(generation - 1)


# -- models ------------------------------------------------------------------------------


class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repeat: int = Field(default=1, ge=1, le=4)
    """How many times the answer repeats the prompt: changes outputs."""
    chunk_size: int = Field(default=3, ge=1)
    """Characters per streamed piece: does not change outputs."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Forwarded to a provider unread (as remote adapters do): may change outputs."""


class EchoLLM(ModelAdapter):
    """Reference for the broken LLMs (passes the whole LLM contract): answers
    with the prompt, ``repeat`` times, streamed in small pieces."""

    Options = EchoOptions
    capabilities = frozenset({Capability.STREAMING, Capability.DETERMINISTIC})
    violates: ClassVar[str] = ""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = model_identity("echo", f"x{self.options.repeat}", extra_body=self.options.extra_body)

    def answer(self, request: ChatRequest) -> str:
        return request.prompt * self.options.repeat

    async def complete(self, request: ChatRequest) -> Completion:
        await asyncio.sleep(0)
        text = self.answer(request)
        return Completion(text=text, usage=Usage(input_tokens=len(words(request.prompt)), output_tokens=len(words(text))))

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        text = (await self.complete(request)).text
        for i in range(0, len(text), self.options.chunk_size):
            yield text[i : i + self.options.chunk_size]


class RepeatBlindIdLLM(EchoLLM):
    """``model_id`` leaves out ``repeat``, which changes every answer."""

    violates: ClassVar[str] = "llm.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores an option that changes outputs"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = "echo"


class PassThroughBlindIdLLM(EchoLLM):
    """``model_id`` leaves out ``extra_body``, which it forwards unread."""

    violates: ClassVar[str] = "llm.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores a pass-through option"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = f"echo:x{self.options.repeat}"


class LastRequestLLM(EchoLLM):
    """Keeps the request on the adapter and answers the latest one: requests
    in flight together get each other's answers."""

    violates: ClassVar[str] = "llm.concurrent.distinct"
    defect: ClassVar[str] = "concurrent requests get the last request's answer"

    async def complete(self, request: ChatRequest) -> Completion:
        self._current = request
        await asyncio.sleep(0.01)
        return Completion(text=self.answer(self._current))


class StrippingStreamLLM(EchoLLM):
    """Strips every streamed piece (whitespace between pieces is lost)."""

    violates: ClassVar[str] = "llm.stream.concatenates"
    defect: ClassVar[str] = "stream() strips each piece"

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        async for piece in super().stream(request):
            if piece.strip():
                yield piece.strip()


class DimensionBlindIdEmbedder(HashEmbedder):
    """``model_id`` leaves out the dimension."""

    violates: ClassVar[str] = "embedder.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores the dimension"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = "hash"


class ShiftingDedupEmbedder(HashEmbedder):
    """De-duplicates texts before embedding, then maps rows back by position."""

    violates: ClassVar[str] = "embedder.embed.duplicates"
    defect: ClassVar[str] = "repeated texts shift the rows after them"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        unique = list(dict.fromkeys(texts))
        rows = await super().embed(unique)
        if not len(texts):
            return rows
        return np.ascontiguousarray(rows[[min(i, len(unique) - 1) for i in range(len(texts))]])


class ZeroBlankEmbedder(HashEmbedder):
    """Returns a zero vector for blank text (what bag-of-words models do)."""

    violates: ClassVar[str] = "embedder.embed.blank-nonzero"
    defect: ClassVar[str] = "blank texts get zero vectors"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = await super().embed(texts)
        for i, t in enumerate(texts):
            if not t.strip():
                out[i] = 0.0
        return out


class ZeroBlankPairEmbedder(ZeroBlankEmbedder):
    """``ZeroBlankEmbedder`` as the embedder of an embedder x vector store pair:
    the vector store rightly rejects its zero rows, so the pair fails."""

    violates: ClassVar[str] = "cross.embedder-vector.accepted"
    defect: ClassVar[str] = "blank texts get zero vectors, which vector stores reject"


class SharedBatchEmbedder(HashEmbedder):
    """Collects texts in one buffer on the adapter: calls in flight together
    read each other's texts."""

    violates: ClassVar[str] = "embedder.embed.concurrent"
    defect: ClassVar[str] = "concurrent calls get another call's rows"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self._buffer = list(texts)
        await asyncio.sleep(0.01)
        mine = self._buffer if len(self._buffer) == len(texts) else list(texts)
        return await super().embed(mine)


class ScaleOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: float = Field(default=1.0, gt=0)
    """Multiplies every score: changes outputs."""


class ScaledOverlapReranker(OverlapReranker):
    """Reference for the broken rerankers (passes the whole reranker contract):
    word overlap times ``scale``."""

    Options = ScaleOptions
    violates: ClassVar[str] = ""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = f"overlap-x{self.options.scale}"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        return [s * self.options.scale for s in await super().scores(query, documents)]


class ScaleBlindIdReranker(ScaledOverlapReranker):
    """``model_id`` leaves out ``scale``."""

    violates: ClassVar[str] = "reranker.model-id.identifies-outputs"
    defect: ClassVar[str] = "model_id ignores an option that changes scores"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.model_id = "overlap"


class ShiftingDedupReranker(ScaledOverlapReranker):
    """Scores unique documents and maps the scores back by position."""

    violates: ClassVar[str] = "reranker.scores.duplicates"
    defect: ClassVar[str] = "repeated documents shift the scores after them"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        unique = list(dict.fromkeys(documents))
        got = await super().scores(query, unique)
        return [got[min(i, len(unique) - 1)] for i in range(len(documents))] if documents else []


class BlankDroppingReranker(ScaledOverlapReranker):
    """Drops blank documents before scoring (as APIs refusing them make
    clients do) and pads the end: the scores after a blank shift."""

    violates: ClassVar[str] = "reranker.scores.blank"
    defect: ClassVar[str] = "blank documents are dropped and the rest shift"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        kept = [d for d in documents if d.strip()]
        got = await super().scores(query, kept)
        return got + [0.0] * (len(documents) - len(got))


class SharedStateReranker(ScaledOverlapReranker):
    """Keeps the query on the adapter: calls in flight together score against
    the last query."""

    violates: ClassVar[str] = "reranker.scores.concurrent"
    defect: ClassVar[str] = "concurrent calls score against another call's query"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        self._query = query
        await asyncio.sleep(0.01)
        return await super().scores(self._query, documents)


class PositionBiasedReranker(ScaledOverlapReranker):
    """Adds a small bonus to earlier documents (a position-biased model): the
    ranking depends on the order the documents came in."""

    violates: ClassVar[str] = "cross.reranker.order"
    defect: ClassVar[str] = "earlier documents score higher"

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        got = await super().scores(query, documents)
        return [s + 0.01 * (len(got) - i) for i, s in enumerate(got)]


# -- leases ------------------------------------------------------------------------------


class MemoryLease:
    """A correct heartbeat lease whose "server" is a dict shared by the lease
    objects of one workspace (the reference of the lease breakers)."""

    heartbeat = True

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table
        self.where = "memory"

    def _current(self) -> Holder | None:
        held = self.table.get("lease")
        return held[0] if held and held[1] > time.monotonic() else None

    async def acquire(self, holder: Holder, ttl: float) -> bool:
        if self._current() is not None:
            return False
        self.table["lease"] = (holder, time.monotonic() + ttl)
        return True

    async def holder(self) -> Holder | None:
        return self._current()

    async def renew(self, holder: Holder, ttl: float) -> bool:
        current = self._current()
        if current is None or current.token != holder.token:
            return False
        self.table["lease"] = (holder, time.monotonic() + ttl)
        return True

    async def release(self, holder: Holder) -> None:
        current = self._current()
        if current is not None and current.token == holder.token:
            del self.table["lease"]


class BlindRenewLease(MemoryLease):
    """Renews whatever lease is there (a bare ``PEXPIRE``): a holder that lost
    its lease extends its successor's and believes it still holds it."""

    violates: ClassVar[str] = "lease.renew.owner-only"
    defect: ClassVar[str] = "renew does not compare the holder"

    async def renew(self, holder: Holder, ttl: float) -> bool:
        current = self._current()
        if current is None:
            return False
        self.table["lease"] = (current, time.monotonic() + ttl)
        return True


class BlindReleaseLease(MemoryLease):
    """Deletes the lease whoever holds it (a bare ``DEL``)."""

    violates: ClassVar[str] = "lease.release.owner-only"
    defect: ClassVar[str] = "release frees another holder's lease"

    async def release(self, holder: Holder) -> None:
        self.table.pop("lease", None)


class EverlastingLease(MemoryLease):
    """Says it has a heartbeat but never expires (a key set without a TTL):
    a holder that died blocks the workspace for ever."""

    violates: ClassVar[str] = "lease.expiry"
    defect: ClassVar[str] = "a lease that is not renewed never expires"

    def _current(self) -> Holder | None:
        held = self.table.get("lease")
        return held[0] if held else None


STORE_BREAKERS: dict[str, tuple[type, ...]] = {
    "KVStoreContract": (CaseFoldingKVStore, ParameterLimitKVStore, OffsetScanKVStore, UnfencedKVStore),
    "VectorStoreContract": (
        CloseOnlyDurableVectorStore, ExclusiveMinScoreVectorStore, ZeroTopKIsUnlimitedVectorStore,
        StringlyFilterVectorStore,
    ),
    "GraphStoreContract": (FirstWinsEdgesGraphStore, SavesWhatItDiscardsGraphStore),
    "DocStatusStoreContract": (
        ExtraEmptyPageDocStatusStore, DeleteKeepsGenerationDocStatusStore, InstanceGenerationDocStatusStore,
        NoTombstoneDocStatusStore, InclusiveChangesDocStatusStore,
    ),
}
MODEL_BREAKERS: dict[str, tuple[type, ...]] = {
    "LLMContract": (RepeatBlindIdLLM, PassThroughBlindIdLLM, LastRequestLLM, StrippingStreamLLM),
    "EmbedderContract": (DimensionBlindIdEmbedder, ShiftingDedupEmbedder, ZeroBlankEmbedder, SharedBatchEmbedder),
    "RerankerContract": (
        ScaleBlindIdReranker, ShiftingDedupReranker, BlankDroppingReranker, SharedStateReranker,
        PositionBiasedReranker,
    ),
}
CROSS_BREAKERS: dict[str, tuple[type, ...]] = {"CrossProtocolContract": (ZeroBlankPairEmbedder,)}
LEASE_BREAKERS: dict[str, tuple[type, ...]] = {
    "LeaseContract": (BlindRenewLease, BlindReleaseLease, EverlastingLease),
}
"""Contract class -> broken adapters run against it."""

REFERENCES: dict[str, type] = {
    "KVStoreContract": SQLiteKVStore,
    "VectorStoreContract": NumpyVectorStore,
    "GraphStoreContract": NetworkXGraphStore,
    "DocStatusStoreContract": SQLiteDocStatusStore,
    "LLMContract": EchoLLM,
    "EmbedderContract": HashEmbedder,
    "RerankerContract": ScaledOverlapReranker,
    "LeaseContract": MemoryLease,
}
"""The unbroken adapter each group of breakers derives from (the control)."""


def rule_breakers() -> list[type]:
    groups = (STORE_BREAKERS, MODEL_BREAKERS, CROSS_BREAKERS, LEASE_BREAKERS)
    return [c for group in groups for cs in group.values() for c in cs]
