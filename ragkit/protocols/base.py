"""What every store shares: configuration, capabilities and a lifecycle.

Lifecycle::

    store = SomeStore(StoreConfig(namespace="chunks", workspace="w1", ...))
    await store.open()      # connect, create tables/collections, load files
    ...reads and writes...
    await store.flush()     # make every write so far durable (commit)
    await store.close()     # flush, then release connections; reopen with open()

``async with store:`` does open/close. Using a store that is not open raises
``StoreClosedError``. ``drop()`` deletes everything in this store's workspace and
namespace (and nothing else) and leaves the store open and empty.

Rules every store kind shares (ids in brackets; the contract suite names the
tests that check each, ``python -m ragkit.testing.contracts --rules``):

- [store.closed.raises] Every call on a store that is not open (never opened,
  or closed) raises ``StoreClosedError``; ``open``/``close`` are idempotent.
- [store.close.durable] With ``Capability.PERSISTENT``, everything written
  before ``close()`` is read back by a *new* instance over the same config.
- [store.flush.durable] With ``Capability.PERSISTENT``, ``flush()`` alone makes
  every write so far durable: a new instance over the same config, opened while
  this one is still open and unclosed, reads it all (the indexer's crash
  recovery relies on flush, not close).
- [store.drop.scoped] ``drop()`` empties this workspace and namespace only;
  other workspaces and namespaces of the same backend keep their data and the
  store stays open.
- [store.keys.exact] Keys and ids are compared code point by code point: keys
  differing only in case (``"Apple"``/``"apple"``), in Unicode normalisation
  (NFC ``"\\u00e9"``/NFD ``"e\\u0301"``) or under case-folding (``"straße"``/``"STRASSE"``,
  final ``"ς"``/``"σ"``) are different records. Backends with case-insensitive
  collations or normalising indexes must store an exact form.
- [store.batch.large] One call may carry any number of keys (thousands, past
  every SQL parameter limit such as SQLite's 999 or 32766): adapters chunk
  their backend statements, and the answer is the same as for small calls.
- [store.delete.missing-ok] Deleting keys that are not stored is not an error.
- [store.scan.complete-under-delete] A scan (``keys()``, ``ids()``,
  ``nodes()``) yields every record that is stored for the whole scan exactly
  once, even while other records are deleted between two items; a record
  deleted during the scan may or may not appear (paging by offset breaks this:
  page by key).
- [store.fence.checked] With a ``fence`` set (the workspace's writer lock,
  ``ragkit.protocols.lease``), every write (``upsert``, ``delete``,
  ``transition``, the graph's node and edge writes, ``flush``, ``drop``) asks
  ``fence.check()`` once it has validated its arguments and before anything
  reaches the backend; when the check raises, the write raises that error and
  changes nothing. Reads never ask. The base classes do this, so no adapter
  can forget it (an override made with ``@bypass_template`` must call
  ``await self._fenced()`` itself).
- [store.discard.unflushed] ``discard()`` drops every write not yet durable,
  in memory too: afterwards ``close()`` saves nothing more, and what a new
  instance reads is what it read before ``discard()``. ``close()`` discards by
  itself when its fence says the lock was lost (``fence.lost``). Stores that
  apply every write when it returns have nothing to drop (the default); a
  store that keeps writes until ``flush`` implements ``_discard``.

Template methods. Every public method of a store protocol is concrete here and
in the kind's base class (``KVStore``, ``VectorStore``, ...): it checks the
store is open and validates and normalises its arguments, once, then calls the
adapter's hook of the same name with a leading underscore (``upsert`` calls
``_upsert``, ``open`` calls ``_open``). Adapters implement only hooks, so no
adapter can forget a rule. A class that overrides a public method instead fails
when it is created, with a ``TypeError`` naming the hook to implement; an
override that must replace the checks too says so with ``@bypass_template``.
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit.errors import ConfigError, StoreClosedError, describe_validation_error

if TYPE_CHECKING:
    from ragkit.protocols.lease import Fence, Lease
    from ragkit.protocols.transaction import TransactionScope

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_HOOK = "__ragkit_hook__"
_BYPASS = "__ragkit_bypass__"


class Capability(str, Enum):
    """Optional behaviour an adapter declares; the contract suite and the
    pipeline ask for these instead of guessing from the adapter's type."""

    PERSISTENT = "persistent"
    """Data survives close() and a new instance's open() on the same config."""
    METADATA_FILTER = "metadata_filter"
    """Vector queries honour ``filter=``."""
    TRANSACTIONAL = "transactional"
    """Each batch write is all-or-nothing."""
    APPROXIMATE_SEARCH = "approximate_search"
    """Vector search may miss true neighbours (recall checked with a tolerance)."""
    CONCURRENT_WRITES = "concurrent_writes"
    """Writes from many tasks of one event loop interleave without lost updates."""
    STREAMING = "streaming"
    """An LLM's ``stream()`` yields pieces as they arrive."""
    JSON_MODE = "json_mode"
    """An LLM honours ``ChatRequest.json_mode``."""
    DETERMINISTIC = "deterministic"
    """A model returns the same output for the same input, every call."""
    GENERATION = "generation"
    """A doc-status store keeps a generation counter that every write bumps
    (``DocStatusStore.generation``), shared by every instance over the same
    backend: readers may keep what they derived from the records until it moves."""
    CHANGES = "changes"
    """A doc-status store with a generation also names the records each write
    changed (``DocStatusStore.changes_since``): readers update what they kept
    with those alone instead of reading every record again."""
    TEXT_SEARCH = "text_search"
    """A KV store ranks its records by the words of one field
    (``StoreConfig.text_field``) for a question's words, by BM25
    (``KVStore.search_text``): the lexical channel of retrieval."""


class NoOptions(BaseModel):
    """Options model for adapters that take none: anything given is an error."""

    model_config = ConfigDict(extra="forbid")


class StoreConfig(BaseModel):
    """What the core hands a store: where it lives and the adapter's options.

    ``options`` is the raw ``[kind.options]`` table from settings; the adapter
    validates it with its own ``Options`` model.
    """

    model_config = ConfigDict(extra="forbid")

    namespace: str
    workspace: str = "default"
    working_dir: Path = Path("./ragkit_data")
    options: dict[str, Any] = Field(default_factory=dict)
    dimension: int | None = Field(default=None, ge=1)
    """Fixed vector length; required by vector stores, ignored by the others."""
    embedder: str | None = None
    """Vector stores: the configured embedder (``name (model_id)``, see
    ``vector.embedder_label``), recorded in the store's metadata when it first
    takes vectors and named when another embedder's vectors meet them."""
    text_field: str | None = None
    """KV stores with ``Capability.TEXT_SEARCH``: the record field whose words
    ``search_text`` ranks by (the chunks' ``content``); ``None``: no text index.
    Ignored by the other stores."""

    @field_validator("namespace", "workspace")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):  # match() lets '$' accept a trailing newline
            raise ValueError(
                f"{value!r} is not a valid name: use 1-64 letters, digits, '_' or '-', "
                "starting with a letter or digit"
            )
        return value


# -- template methods -------------------------------------------------------------


def template(hook: str) -> Callable[[F], F]:
    """Mark a protocol's public method as final: adapters change what it does
    through ``hook`` (named in the error an override gets)."""

    def mark(fn: F) -> F:
        setattr(fn, _HOOK, hook)
        return fn

    return mark


def bypass_template(reason: str) -> Callable[[F], F]:
    """The escape hatch: let an adapter override a public method itself.

    The override then owns everything the base class did there: call
    ``self._check_open()`` first and validate its arguments with the protocol's
    helpers. ``reason`` says why the hook is not enough (kept on the function).
    """
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("bypass_template needs a reason: why the hook is not enough")

    def mark(fn: F) -> F:
        setattr(fn, _BYPASS, reason)
        return fn

    return mark


def _member(value: Any) -> Any:
    return value.__func__ if isinstance(value, (classmethod, staticmethod)) else value


def _check_overrides(cls: type) -> None:
    """Raise ``TypeError`` when ``cls`` resolves a final public method to an
    unmarked override (defined by it or by a mixin before the protocol)."""
    hooks: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            hook = getattr(_member(value), _HOOK, None)
            if hook is not None:
                hooks[name] = hook
    for name, hook in hooks.items():
        value = _member(inspect.getattr_static(cls, name))
        if getattr(value, _HOOK, None) is not None or getattr(value, _BYPASS, None):
            continue
        owner = next(k for k in cls.__mro__ if name in vars(k))
        raise TypeError(
            f"{owner.__qualname__} overrides {name}(), which the store protocol defines "
            f"once for every adapter (it checks the store is open and validates the "
            f"arguments): implement {hook} instead, or, if the override must replace "
            f"those checks too, decorate it with @ragkit.protocols.bypass_template(reason)"
        )


class BaseStore(ABC):
    """Shared plumbing for every store kind; adapters subclass a kind's ABC.

    Hooks of the lifecycle (all optional but ``_drop``): ``_open`` connects or
    loads, ``_flush`` makes writes durable, ``_close`` releases (by default it
    flushes), ``_discard`` drops writes not yet durable, ``_drop`` deletes this
    workspace's and namespace's data. They run only when the lifecycle allows:
    ``_open`` on a closed store, the others on an open one.
    """

    fence: Fence | None = None
    """Asked before every write [store.fence.checked]; set by whoever runs the
    store under the workspace's writer lock (``ragkit.core.stores.Stores``),
    ``None`` for a store used alone."""

    name: ClassVar[str] = ""
    """Registered name, e.g. ``"sqlite"``."""
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        try:
            self.options = self.Options.model_validate(config.options)
        except Exception as exc:  # pydantic's message lists every bad field
            raise ConfigError(
                f"invalid options for {type(self).__name__} "
                f"(namespace {config.namespace!r}): {describe_validation_error(exc)}"
            ) from exc
        self._is_open = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_overrides(cls)

    @property
    def namespace(self) -> str:
        return self.config.namespace

    @property
    def workspace(self) -> str:
        return self.config.workspace

    @property
    def is_open(self) -> bool:
        return self._is_open

    def _check_open(self) -> None:
        if not self._is_open:
            raise StoreClosedError(
                f"{type(self).__name__} {self.workspace}/{self.namespace} is not open: "
                "call `await store.open()` (or use `async with store:`) first"
            )

    async def _while_open(self, items: AsyncIterator[T]) -> AsyncIterator[T]:
        """``items``, checking before each one that the store is still open (a
        scan outliving ``close()`` raises ``StoreClosedError``, not a backend error)."""
        try:
            while True:
                self._check_open()
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    return
                yield item
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()

    # -- the lifecycle -------------------------------------------------------------

    @template("_open")
    async def open(self) -> None:
        """Connect, create tables or collections, load files; no-op when open."""
        if self._is_open:
            return
        await self._open()
        self._is_open = True

    @template("_flush")
    async def flush(self) -> None:
        """Make every write so far durable [store.flush.durable]."""
        self._check_open()
        await self._fenced()
        await self._flush()

    @template("_close")
    async def close(self) -> None:
        """Flush, then release connections; no-op when closed. The instance can
        be opened again. When ``_close`` fails the store stays open, so nothing
        not yet saved is thrown away. When the fence says the writer lock was
        lost, nothing more is saved: unsaved writes are discarded first
        [store.discard.unflushed]."""
        if not self._is_open:
            return
        if self.fence is not None and self.fence.lost:
            await self._discard()
        await self._close()
        self._is_open = False

    @template("_discard")
    async def discard(self) -> None:
        """Drop every write not yet durable, in memory too [store.discard.unflushed]:
        this process lost the writer lock, so they must never reach the backend."""
        self._check_open()
        await self._discard()

    @template("_drop")
    async def drop(self) -> None:
        """Delete everything of this workspace and namespace; the store stays open."""
        self._check_open()
        await self._fenced()
        await self._drop()

    def writer_lease(self) -> Lease | None:
        """Optional hook: the workspace's writer lock (``ragkit.core.lock``) as
        a lease in this store's server, for stores that every process of the
        workspace shares, wherever it runs (rules: ``ragkit.protocols.lease``).
        ``None`` (the default): the store cannot hold one. The core asks the
        doc-status store first, then the graph, KV and vector stores; when none
        offers a lease, the lock is a file lock beside the workspace's files."""
        return None

    def transaction_scope(self) -> TransactionScope | None:
        """Optional hook: the backend transaction this store can write through
        together with the other stores returning the same object (rules:
        ``ragkit.protocols.transaction``); the indexer commits each batch in
        it. ``None`` (the default): every call applies on its own."""
        return None

    async def _fenced(self) -> None:
        """Ask the fence before a write reaches the backend [store.fence.checked]."""
        fence = self.fence
        if fence is not None:
            await fence.check()

    async def _open(self) -> None:
        """Hook of ``open()``: connect or load. Release what it took if it fails."""

    async def _flush(self) -> None:
        """Hook of ``flush()``; nothing to do for stores that commit every write."""

    async def _close(self) -> None:
        """Hook of ``close()``: flush (the default), then release connections."""
        await self._flush()

    async def _discard(self) -> None:
        """Hook of ``discard()``; nothing to do for stores that apply every write
        when it returns. A store that keeps writes until ``flush`` forgets them
        here (and reloads what is durable)."""

    @abstractmethod
    async def _drop(self) -> None:
        """Hook of ``drop()``."""

    async def __aenter__(self):
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(workspace={self.workspace!r}, namespace={self.namespace!r})"


def storable_key(key: object) -> bool:
    """A key that can exist in a store: a non-empty str that encodes as UTF-8
    (lone surrogates cannot). Reads and deletes treat any other key as missing."""
    return isinstance(key, str) and bool(key) and valid_unicode(key)


def valid_unicode(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogate): what every store
    can keep."""
    if text.isascii():  # the common case, without encoding
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def distinct(keys: Iterable[object]) -> list[Any]:
    """The distinct items of ``keys`` in first-seen order. A single str is one
    key (``delete("a")`` deletes ``"a"``, not its letters); unhashable items
    are left out (they name nothing a store holds)."""
    if isinstance(keys, str):
        return [keys]
    keys = keys if isinstance(keys, (list, tuple)) else list(keys)
    try:
        return list(dict.fromkeys(keys))
    except TypeError:
        return list(dict.fromkeys(k for k in keys if _hashable(k)))


def unique_keys(keys: Iterable[object]) -> list[str]:
    """The distinct storable keys of ``keys``, in first-seen order."""
    return [k for k in distinct(keys) if storable_key(k)]


def in_order(
    asked: Sequence[object], found: Mapping[Any, T], convert: Callable[[T], Any], missing: Any = None
) -> list[Any]:
    """A batch read's answer: ``convert(found[k])`` per asked key, in the asked
    order (duplicates included, each converted anew), ``missing`` where absent."""
    get = found.get
    try:
        return [missing if (v := get(k)) is None else convert(v) for k in asked]
    except TypeError:  # an unhashable key was asked: it is missing
        return [missing if (v := _lookup(found, k)) is None else convert(v) for k in asked]


def _hashable(key: object) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _lookup(found: Mapping[Any, T], key: object) -> T | None:
    return found.get(key) if _hashable(key) else None


class KeyedStore(BaseStore):
    """A store of records under string ids (KV, vector, doc status): deleting by
    id and counting are the same rule for each."""

    @template("_delete")
    async def delete(self, ids: Iterable[str]) -> None:
        """Remove these ids; missing ids are not an error."""
        self._check_open()
        wanted = unique_keys(ids)
        if wanted:
            await self._fenced()
            await self._delete(wanted)

    @template("_count")
    async def count(self) -> int:
        """Number of records in this namespace and workspace."""
        self._check_open()
        return int(await self._count())

    @abstractmethod
    async def _delete(self, ids: list[str]) -> None:
        """Remove these ids (distinct, storable, at least one)."""

    @abstractmethod
    async def _count(self) -> int:
        """Hook of ``count()``: the number of records."""
