"""The Ray executor: loaders and chunking as Ray tasks, the models in Ray actors.

What runs where:

- **Model actors** (``_ModelWorker``, spread over the nodes, one per node by
  default): each builds the LLM and the embedder from their recipes on its
  worker, once, and serves calls concurrently (async actor). The driver's
  ``CachedLLM`` answers from the cache and bounds the calls in flight, so the
  limit holds across the whole cluster.
- **Tasks**: a file's loader (``_load``) and a document's chunking (``_chunk``),
  one CPU each.

Faults, as Ray handles them and as the tests show (tests/ray): a killed worker
process is restarted (actors: ``max_restarts=-1``) and its calls are retried
(``max_task_retries=-1``; tasks: ``max_retries``); a node that leaves takes its
actor with it and the actor comes back on another node; the driver killed
ends the job (its actors die with it) and the next run resumes from the
stores and the LLM cache, as an in-process run does. Retried calls are safe:
an LLM call and an embedding have no effect but their answer, and only the
driver writes.

Errors: an exception a model raised on a worker reaches the indexer as that
exception (Ray's wrapper, with its remote traceback, is dropped), so a
document fails with the same message as in-process.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ragkit.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from ragkit.executors import ModelRecipe
    from ragkit.loaders import Loaded, Loader
    from ragkit.pipeline.chunk import Chunker
    from ragkit.protocols import LLM, ChatRequest, Completion, Embedder
    from ragkit.schema import Chunk, Document
    from ragkit.sections.index import RayConfig

try:
    import ray
    from ray.exceptions import RayTaskError
except ImportError:  # the extra is missing: RayExecutor says how to get it
    ray = None  # type: ignore[assignment]

FORWARDED_PREFIX = "RAGKIT_"
"""Environment variables the workers get from the driver (settings, the
musique data path of the replay model, test doubles): a worker builds its
models from the same configuration."""

FILE_RETRIES = 3
"""Retries of a loader or chunking task whose worker died."""


START_HINT = "start one (ray start --head prints its address) or set --address / [index.ray] address to its host:port"


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail at once when nothing listens at ``host:port``: Ray itself retries
    for minutes, printing a warning every few seconds."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"Ray address {address!r} is not host:port: {START_HINT}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(f"no Ray cluster answers at {address} ({exc.strerror or exc}): {START_HINT}") from None


def _require_ray() -> Any:
    if ray is None:
        raise ConfigError(
            "[index] executor = 'ray' needs Ray: pip install 'ragkit[ray]' (on the driver and every node)"
        )
    return ray


class RayExecutor:
    name = "ray"

    def __init__(self, config: RayConfig, recipes: dict[str, ModelRecipe], llm_concurrency: int) -> None:
        _require_ray()
        self.config = config
        self.recipes = recipes
        self.llm_concurrency = llm_concurrency
        self._pool: _ActorPool | None = None
        self._connected = False

    # -- the cluster -----------------------------------------------------------

    def _connect(self) -> None:
        """Join this process's Ray connection, made here if none is open. It is
        shared by every executor of the process (a server's workspaces), and
        closed with the last of them when one of them made it."""
        with _CONNECTION.lock:
            if self._connected:
                return
            if not ray.is_initialized():
                self._init()
                _CONNECTION.ours = True
            _CONNECTION.users += 1
            self._connected = True

    def _init(self) -> None:
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIX)}
        from ragkit.plugins.registry import test_doubles_wanted

        if test_doubles_wanted():  # the test suite's models, on the workers too
            env["RAGKIT_TEST_DOUBLES"] = "1"
        address = self.config.address or os.environ.get("RAY_ADDRESS") or None
        if address and address != "auto":
            _check_reachable(address)
        own = {} if address else {"include_dashboard": False}  # a cluster of our own: no dashboard
        try:
            ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False,
                     logging_level="ERROR", **own)
        except ConnectionError as exc:
            raise ConfigError(f"no Ray cluster at {address!r} ({exc}): {START_HINT}") from None

    def _actors(self) -> _ActorPool:
        if self._pool is None:
            self._connect()
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            alive = sorted(node["NodeID"] for node in ray.nodes() if node.get("Alive"))
            count = self.config.model_workers or len(alive)
            worker = ray.remote(_ModelWorker)
            options = {"num_cpus": 0, "max_restarts": -1, "max_task_retries": -1,
                       "max_concurrency": max(2, self.llm_concurrency * 2)}
            # Node by node in turn (SPREAD may put two on one node); soft: a
            # node that leaves gets its actor restarted on another.
            actors = [
                worker.options(**options, scheduling_strategy=NodeAffinitySchedulingStrategy(
                    alive[i % len(alive)], soft=True)).remote(self.recipes)
                for i in range(count)
            ]
            for actor in actors:  # build the models now, not at the first call
                actor.warm.remote()
            self._pool = _ActorPool(actors)
        return self._pool

    # -- the Executor protocol -------------------------------------------------

    def models(self, llm: LLM, embedder: Embedder) -> tuple[LLM, Embedder]:
        return RemoteLLM(llm, self._actors), RemoteEmbedder(embedder, self._actors)

    async def chunk(self, chunker: Chunker, doc: Document) -> list[Chunk]:
        self._actors()  # an insert is under way: its model actors start meanwhile
        return await _unwrapped(_remote(_chunk).remote(chunker, doc))

    def loader_submit(self) -> Callable[[Loader, bytes, str], Callable[[], Loaded]]:
        """Files read by tasks, at most two per cluster CPU at a time: the walk
        waits for the oldest before it sends more, so the driver holds a
        bounded number of files' bytes however many the inputs name."""
        self._connect()
        task = _remote(_load)
        limit = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending: deque = deque()

        def submit(loader: Loader, data: bytes, name: str) -> Callable[[], Loaded]:
            while len(pending) >= limit:
                ray.wait([pending.popleft()])
            ref = task.remote(loader, data, name)
            pending.append(ref)
            return lambda: _get(ref)

        return submit

    def close(self) -> None:
        if self._pool is not None:
            for actor in self._pool.actors:
                ray.kill(actor)
            self._pool = None
        with _CONNECTION.lock:
            if not self._connected:
                return
            self._connected = False
            _CONNECTION.users -= 1
            if _CONNECTION.users == 0 and _CONNECTION.ours:
                _CONNECTION.ours = False
                if ray.is_initialized():
                    ray.shutdown()


class _Connection:
    """This process's Ray connection as the executors share it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.ours = False


_CONNECTION = _Connection()


class _ActorPool:
    """The model actors, taken in turn (each serves many calls at once)."""

    def __init__(self, actors: list) -> None:
        self.actors = actors
        self._turn = itertools.count()

    async def call(self, method: str, *args: Any) -> Any:
        actor = self.actors[next(self._turn) % len(self.actors)]
        return await _unwrapped(getattr(actor, method).remote(*args))


class RemoteLLM:
    """The configured LLM, called in a model actor. Its identity is the
    model's: the cache keys, and so resume and the stores, are those of an
    in-process run."""

    def __init__(self, inner: LLM, pool: Callable[[], _ActorPool]) -> None:
        self.model_id = inner.model_id
        self.capabilities = inner.capabilities
        self._pool = pool

    async def complete(self, request: ChatRequest) -> Completion:
        return await self._pool().call("complete", request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        # Indexing never streams; a whole answer is one piece.
        yield (await self.complete(request)).text


class RemoteEmbedder:
    """The configured embedder, called in a model actor."""

    def __init__(self, inner: Embedder, pool: Callable[[], _ActorPool]) -> None:
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.max_batch_size = inner.max_batch_size
        self.capabilities = inner.capabilities
        self._pool = pool

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self._pool().call("embed", list(texts))


class _ModelWorker:
    """A Ray actor holding the models, built on first use from the recipes
    (an error building one is then the error of each call, not a dead actor)."""

    def __init__(self, recipes: dict[str, ModelRecipe]) -> None:
        self._recipes = recipes
        self._models: dict[str, Any] = {}

    def _model(self, kind: str) -> Any:
        if kind not in self._models:
            self._models[kind] = self._recipes[kind]()
        return self._models[kind]

    async def complete(self, request: ChatRequest) -> Completion:
        return await self._model("llm").complete(request)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._model("embedder").embed(texts)

    async def warm(self) -> None:
        """Build the models (an error is kept for the calls to raise)."""
        for kind in self._recipes:
            try:
                self._model(kind)
            except Exception:  # noqa: S110 - the first call that needs the model builds it again and raises
                pass


def _chunk(chunker: Chunker, doc: Document) -> list[Chunk]:
    return chunker.chunk(doc)


def _load(loader: Loader, data: bytes, name: str) -> Loaded:
    return loader.load(data, name)


@functools.cache
def _remote(fn: Callable) -> Any:
    """``fn`` as a Ray task, retried when its worker dies (made once per process)."""
    return ray.remote(fn).options(max_retries=FILE_RETRIES)


async def _unwrapped(ref: Any) -> Any:
    try:
        return await ref
    except RayTaskError as exc:
        raise _cause(exc) from None


def _get(ref: Any) -> Any:
    try:
        return ray.get(ref)
    except RayTaskError as exc:
        raise _cause(exc) from None


def _cause(exc: RayTaskError) -> BaseException:
    cause = exc.cause
    return cause if isinstance(cause, BaseException) else exc

