"""The stores one workspace uses, opened and closed together."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ragkit.backends import build_store
from ragkit.plugins import Registry
from ragkit.protocols import DocStatusStore, GraphStore, KVStore, VectorStore
from ragkit.settings import Settings


@dataclass
class Stores:
    full_docs: KVStore
    """doc id -> {content, file_path, metadata}"""
    chunks: KVStore
    """chunk id -> {content, doc_id, order, tokens, file_path}"""
    extractions: KVStore
    """chunk id -> the parsed extraction of that chunk: the per-source facts that
    every entity and relation is recomputed from (on merge, delete and repair)"""
    llm_cache: KVStore
    """request cache key -> {text, model_id, role}"""
    doc_paths: KVStore
    """file path -> {doc_id}: finds the old version of a changed file"""
    chunk_vectors: VectorStore
    entity_vectors: VectorStore
    relation_vectors: VectorStore
    graph: GraphStore
    doc_status: DocStatusStore

    @classmethod
    def from_settings(
        cls, settings: Settings, dimension: int, registry: Registry | None = None
    ) -> Stores:
        def kv(ns: str) -> KVStore:
            return build_store(settings, "kv", ns, registry=registry)

        def vec(ns: str) -> VectorStore:
            return build_store(settings, "vector", ns, dimension, registry=registry)

        return cls(
            full_docs=kv("full_docs"),
            chunks=kv("chunks"),
            extractions=kv("extractions"),
            llm_cache=kv("llm_cache"),
            doc_paths=kv("doc_paths"),
            chunk_vectors=vec("chunks"),
            entity_vectors=vec("entities"),
            relation_vectors=vec("relations"),
            graph=build_store(settings, "graph", "graph", registry=registry),
            doc_status=build_store(settings, "doc_status", "doc_status", registry=registry),
        )

    def all(self) -> list:
        return [getattr(self, f.name) for f in fields(self)]

    async def open(self) -> None:
        for store in self.all():
            await store.open()

    async def flush(self) -> None:
        for store in self.all():
            await store.flush()

    async def close(self) -> None:
        for store in self.all():
            await store.close()
