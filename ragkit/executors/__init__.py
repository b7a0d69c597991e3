"""Where the ingestion's work runs: this process, or a Ray cluster.

The indexer decides *what* is done and in which order; an executor decides
*where* the heavy, stateless parts run: reading a file with its loader,
chunking a document, an LLM call, an embedding batch. Everything that holds
state stays with the caller, whichever executor runs: the LLM cache (so an
answer already cached is never asked again, on any node), the concurrency
limit on LLM calls (one ``CachedLLM`` semaphore, so the limit holds
cluster-wide: the provider's rate limit does not grow with the cluster), the
merge and every store write (one writer per workspace, the writer lock).
The stores therefore come out the same from either executor; only the time
differs.

- ``LocalExecutor`` (``[index] executor = "local"``, the default): loaders in
  this process, chunking on the writer's threads, the models as given.
- ``RayExecutor`` (``executor = "ray"``, ``ragkit.executors.ray_cluster``):
  loaders and chunking as Ray tasks, the models in Ray actors built on the
  workers from a ``ModelRecipe``. Ray is the ``ragkit[ray]`` extra.

Back-pressure is the indexer's: at most ``max_docs_in_flight`` documents and
``4 * llm_concurrency`` chunks are in flight, so the driver's memory does not
grow with the cluster's speed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ragkit.core.pacing import in_writer_thread

if TYPE_CHECKING:
    from ragkit.loaders import Loaded, Loader
    from ragkit.pipeline.chunk import Chunker
    from ragkit.protocols import LLM, Embedder
    from ragkit.schema import Chunk, Document
    from ragkit.sections.index import IndexConfig
    from ragkit.settings import Settings

__all__ = ["Executor", "LocalExecutor", "ModelRecipe", "executor_for", "model_recipe"]

ModelRecipe = Callable[[], Any]
"""A picklable call that builds a model where it runs: on a Ray worker the
configured adapter is built from its name and options (a client holding
sockets cannot travel; its settings can)."""


class Executor(Protocol):
    name: str

    def models(self, llm: LLM, embedder: Embedder) -> tuple[LLM, Embedder]:
        """The models the indexer calls: these, or stand-ins that call them elsewhere."""
        ...

    async def chunk(self, chunker: Chunker, doc: Document) -> list[Chunk]: ...

    def loader_submit(self) -> Callable[[Loader, bytes, str], Callable[[], Loaded]] | None:
        """For ``load_documents(submit=)``: start reading a file, return the
        wait for its result; ``None``: read each file in this process."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    name = "local"

    def models(self, llm: LLM, embedder: Embedder) -> tuple[LLM, Embedder]:
        return llm, embedder

    async def chunk(self, chunker: Chunker, doc: Document) -> list[Chunk]:
        # On the writer's threads: tiktoken encodes a large document in one
        # call, which would hold the loop (it releases the GIL meanwhile).
        return await in_writer_thread(chunker.chunk, doc)

    def loader_submit(self) -> None:
        return None

    def close(self) -> None:
        pass


def executor_for(config: IndexConfig, recipes: dict[str, ModelRecipe]) -> Executor:
    """The executor ``config.executor`` names; ``recipes`` build the LLM and the
    embedder on a remote worker (``model_recipe``)."""
    if config.executor == "ray":
        from ragkit.executors.ray_cluster import RayExecutor

        return RayExecutor(config.ray, recipes, config.llm_concurrency)
    return LocalExecutor()


def model_recipe(kind: str, given: Any, settings: Settings) -> ModelRecipe:
    """How a worker builds the model ``RAG`` built from ``given`` (``None``: the
    settings; a registered name; or an instance, which then travels pickled)."""
    from ragkit.plugins.registry import create_model

    if given is None:
        backend = getattr(settings, kind)
        if backend is None:
            return functools.partial(_default_model, kind)
        return functools.partial(create_model, kind, backend.name, backend.adapter_options())
    if isinstance(given, str):
        return functools.partial(create_model, kind, given)
    return functools.partial(_same, given)


def _default_model(kind: str) -> Any:
    if kind == "llm":
        from ragkit.offline import default_llm

        return default_llm()
    return None


def _same(model: Any) -> Any:
    return model
