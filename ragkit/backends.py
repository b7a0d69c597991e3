"""Build the configured adapters from settings: the wiring, at the top of the
house (beside ``rag.py``, the CLI and the server), so that nothing under it
(``core``, the pipeline, the query side) imports settings to build a store."""

from __future__ import annotations

from typing import Any

from ragkit.core.stores import Stores
from ragkit.errors import ConfigError, describe_validation_error
from ragkit.plugins import Registry, create_model, create_store, get_registry
from ragkit.protocols import KVStore, VectorStore
from ragkit.protocols.base import StoreConfig
from ragkit.settings import SECTIONS, Settings


def store_config(
    settings: Settings, kind: str, namespace: str, dimension: int | None = None, embedder: str | None = None,
    text_field: str | None = None,
) -> StoreConfig:
    backend = getattr(settings, kind)
    return StoreConfig(
        namespace=namespace,
        workspace=settings.workspace,
        working_dir=settings.working_dir,
        options=backend.adapter_options(),
        dimension=dimension,
        embedder=embedder,
        text_field=text_field,
    )


def build_store(
    settings: Settings,
    kind: str,
    namespace: str,
    dimension: int | None = None,
    registry: Registry | None = None,
    embedder: str | None = None,
    text_field: str | None = None,
) -> Any:
    backend = getattr(settings, kind)
    config = store_config(settings, kind, namespace, dimension, embedder, text_field)
    return create_store(kind, backend.name, config, registry or get_registry())


CHUNK_TEXT_FIELD = "content"
"""What the lexical channel searches: a chunk's text (a KV store with
``Capability.TEXT_SEARCH`` indexes its words; the others ignore it)."""


def build_stores(
    settings: Settings, dimension: int, registry: Registry | None = None, embedder: str | None = None
) -> Stores:
    """The workspace's stores, each of the configured kind, and its writer lock
    set from ``[lock]``. ``embedder``: the configured one's
    ``vector.embedder_label``, which the vector stores record and name when
    another's vectors meet them."""

    def kv(ns: str, text_field: str | None = None) -> KVStore:
        return build_store(settings, "kv", ns, registry=registry, text_field=text_field)

    def vec(ns: str) -> VectorStore:
        return build_store(settings, "vector", ns, dimension, registry=registry, embedder=embedder)

    stores = Stores(
        full_docs=kv("full_docs"),
        chunks=kv("chunks", CHUNK_TEXT_FIELD),
        extractions=kv("extractions"),
        llm_cache=kv("llm_cache"),
        doc_paths=kv("doc_paths"),
        aliases=kv("aliases"),
        alias_splits=kv("alias_splits"),
        chunk_vectors=vec("chunks"),
        entity_vectors=vec("entities"),
        relation_vectors=vec("relations"),
        graph=build_store(settings, "graph", "graph", registry=registry),
        doc_status=build_store(settings, "doc_status", "doc_status", registry=registry),
    )
    stores.lock.settings = settings.lock
    return stores


def build_model(settings: Settings, kind: str, registry: Registry | None = None) -> Any:
    """The configured model of ``kind``, or ``None`` where that kind is optional and unset."""
    backend = getattr(settings, kind)
    if backend is None:
        return None
    return create_model(kind, backend.name, backend.adapter_options(), registry or get_registry())


def validate_options(settings: Settings, registry: Registry | None = None) -> dict[str, str | None]:
    """For each configured kind: ``None`` when its adapter accepts the options,
    else the problem. Resolving names here surfaces unknown backends early."""
    registry = registry or get_registry()
    problems: dict[str, str | None] = {}
    for kind in SECTIONS:
        backend = getattr(settings, kind)
        if backend is None:
            continue
        try:
            cls = registry.get(kind, backend.name)
            options_model = getattr(cls, "Options", None)
            if options_model is not None:
                options_model.model_validate(backend.adapter_options())
            problems[kind] = None
        except ConfigError as exc:
            problems[kind] = str(exc)
        except Exception as exc:  # pydantic ValidationError from the adapter's model
            problems[kind] = f"invalid options for {backend.name!r}: {describe_validation_error(exc)}"
    return problems
