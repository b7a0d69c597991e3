"""Machinery shared by every contract class.

An adapter author never needs this module directly: subclass a contract class
and override its ``adapter`` fixture. What lives here:

- ``ContractBase``: the ``adapter`` fixture to override, the guard test
  ``test_no_overrides_DO_NOT_OVERRIDE`` and the capability gate;
- ``StoreContractBase``: the store hygiene checks (empty before each test,
  empty through a fresh instance after the fixture's teardown) and the
  ``test_aaa_store_is_empty`` canary;
- ``needs``: how a test declares the optional ``Capability`` it tests;
- ``same``/``difference``: value comparison that tells ``True`` from ``1`` and
  ``1`` from ``1.0`` (Python's ``==`` does not).

The differential state machines' base is ``base.machine``, the rule ids and
``@checks`` are ``base.checks``.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, ClassVar, TypeVar

import pytest
import pytest_asyncio

from ragkit.plugins.kinds import KINDS
from ragkit.protocols.base import BaseStore, Capability

T = TypeVar("T")

SKIP_PREFIX = "adapter does not declare Capability."
"""Every skip the contract suite makes starts with this; nothing else may skip."""

GUARD_TEST = "test_no_overrides_DO_NOT_OVERRIDE"

PROTECTED = (
    "_ragkit_hygiene",
    "_ragkit_after_teardown",
    "_ragkit_capability_gate",
    "describe_contents",
    "assert_still_empty",
)
"""Non-test members that enforce the contract; the guard test fails if a subclass overrides them."""

CONTRACTS: dict[str, type] = {}
"""Registry kind (``"kv"``, ``"vector"``, ...) -> contract class, in registry order."""

KIND_ORDER = tuple(KINDS)


# -- capabilities ------------------------------------------------------------------


def needs(capability: Capability) -> Callable[[T], T]:
    """Mark a contract test as checking an optional capability.

    The contract's autouse gate reads ``type(adapter).capabilities`` before the
    test runs and skips it with ``adapter does not declare Capability.X`` when
    the adapter does not declare it. Nothing else in the suite skips.
    """

    def mark(fn: T) -> T:
        fn.ragkit_capability = capability  # type: ignore[attr-defined]
        return fn

    return mark


def declared(adapter: Any) -> frozenset[Capability]:
    """The capabilities an adapter declares (its class's, else the instance's)."""
    caps = getattr(type(adapter), "capabilities", None)
    if not isinstance(caps, (frozenset, set)):
        caps = getattr(adapter, "capabilities", frozenset())
    return frozenset(caps)


def require(adapter: Any, capability: Capability) -> None:
    """Skip the running test unless ``adapter`` declares ``capability``."""
    if capability not in declared(adapter):
        pytest.skip(f"{SKIP_PREFIX}{capability.name}")


def required_capability(contract: type, test_name: str) -> Capability | None:
    fn = inspect.getattr_static(contract, test_name, None)
    return getattr(fn, "ragkit_capability", None)


# -- contract classes ------------------------------------------------------------


def contract_test_names(cls: type) -> list[str]:
    """Every ``test_*`` method of ``cls`` (inherited ones included), sorted."""
    names = {
        name
        for klass in cls.__mro__
        for name, value in vars(klass).items()
        if name.startswith("test_") and callable(value)
    }
    return sorted(names)


def contract(kind: str, protocol: type, *, listed: bool = True) -> Callable[[type[T]], type[T]]:
    """Register a contract class for a registry kind and mark its async tests;
    ``listed=False`` for a contract of no registry kind (leases): not in ``CONTRACTS``."""

    def register(cls: type[T]) -> type[T]:
        cls.contract_kind = kind  # type: ignore[attr-defined]
        cls.contract_protocol = protocol  # type: ignore[attr-defined]
        cls._contract_root = cls  # type: ignore[attr-defined]
        for klass in cls.__mro__:
            for name, value in vars(klass).items():
                if name.startswith("test_") and inspect.iscoroutinefunction(value):
                    marks = getattr(value, "pytestmark", [])
                    if not any(m.name == "asyncio" for m in marks):
                        # Lets the suite run under pytest-asyncio's strict mode too.
                        pytest.mark.asyncio(value)
        if not listed:
            return cls
        CONTRACTS[kind] = cls
        ordered = sorted(CONTRACTS.items(), key=lambda kv: KIND_ORDER.index(kv[0]) if kv[0] in KIND_ORDER else 99)
        CONTRACTS.clear()
        CONTRACTS.update(ordered)
        return cls

    return register


def _xfail_reason(fn: Any) -> str | None:
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "xfail":
            reason = mark.kwargs.get("reason") or (mark.args[1] if len(mark.args) > 1 else None)
            if reason:
                return str(reason)
    return None


class ContractBase:
    """What every contract class shares; see the module docstring."""

    contract_kind: ClassVar[str]
    contract_protocol: ClassVar[type]
    _contract_root: ClassVar[type]

    @pytest.fixture
    def adapter(self):
        """Override me: yield a fresh, empty, opened instance; close/drop it after."""
        pytest.fail(
            f"{type(self).__name__} must override the `adapter` fixture: a "
            "`@pytest.fixture async def adapter(self, tmp_path)` that yields a fresh, "
            "empty, opened store (or a model instance) and drops/closes it afterwards"
        )

    def test_no_overrides_DO_NOT_OVERRIDE(self):
        """Every contract test still runs as written: none removed or overridden
        unless the override is marked ``pytest.mark.xfail(reason=...)``.

        Troubleshoot: do not override contract tests to make them pass. If the
        adapter genuinely cannot meet a check yet, override that one test with
        ``@pytest.mark.xfail(reason="why, and the issue tracking it")`` so the
        gap stays visible. If the adapter lacks an optional feature, declare its
        capabilities honestly instead: capability-gated tests skip by themselves.
        """
        root = self._contract_root
        mine = type(self)
        problems = []
        if inspect.getattr_static(mine, "adapter") is inspect.getattr_static(root, "adapter"):
            problems.append("the `adapter` fixture is not overridden")
        for name in PROTECTED:
            expected = inspect.getattr_static(root, name, None)
            if expected is not None and inspect.getattr_static(mine, name, None) is not expected:
                problems.append(f"{name} (the suite's own checking machinery) is overridden")
        for name in contract_test_names(root):
            expected = inspect.getattr_static(root, name)
            actual = inspect.getattr_static(mine, name, None)
            if actual is expected:
                continue
            if actual is None or not callable(actual):
                problems.append(f"{name} was removed (set to {actual!r})")
            elif _xfail_reason(actual) is None:
                problems.append(
                    f"{name} is overridden without @pytest.mark.xfail(reason=...)"
                )
        if problems:
            pytest.fail(
                f"{mine.__name__} changes {root.__name__}'s tests:\n  - "
                + "\n  - ".join(problems)
                + "\nContract tests must run unchanged; mark a known gap with "
                "@pytest.mark.xfail(reason=...) on an override."
            )


class StoreContractBase(ContractBase):
    """Adds the store hygiene checks: the store is empty before each test, and a
    fresh instance over the same config is empty after the fixture's teardown."""

    async def describe_contents(self, store: Any) -> str:
        """``""`` when ``store`` is empty, else a short description of what it holds."""
        raise NotImplementedError

    @pytest_asyncio.fixture
    async def _ragkit_after_teardown(self):
        # Requested before `adapter` by the hygiene fixture, so this teardown runs
        # after the adapter fixture's own teardown.
        seen: list[tuple[type, Any]] = []
        yield seen
        for cls, config in seen:
            fresh = cls(config)
            await fresh.open()
            try:
                left = await self.describe_contents(fresh)
                if left:
                    await fresh.drop()
                    pytest.fail(
                        f"after the `adapter` fixture's teardown, a fresh {cls.__name__} over "
                        f"the same config still holds data ({left}): the fixture leaks state "
                        "into later tests. Drop the store in its teardown (`await store.drop()` "
                        "before `close()`)."
                    )
            finally:
                await fresh.close()

    @pytest_asyncio.fixture(autouse=True)
    async def _ragkit_hygiene(self, request, _ragkit_after_teardown, adapter):
        protocol = self.contract_protocol
        if not isinstance(adapter, protocol):
            pytest.fail(
                f"the `adapter` fixture yielded {adapter!r}, not a {protocol.__name__}: "
                f"subclass ragkit.protocols.{protocol.__name__}"
            )
        if not adapter.is_open:
            pytest.fail(
                "the `adapter` fixture yielded a store that is not open: "
                "`await store.open()` (or `async with store:`) before yielding it"
            )
        cap = required_capability(self._contract_root, request.function.__name__)
        if cap is not None:
            require(adapter, cap)
        left = await self.describe_contents(adapter)
        if left:
            pytest.fail(
                f"the `adapter` fixture yielded a store that is not empty ({left}): it "
                "must yield a fresh, empty store. Use a unique workspace or tmp_path per "
                "test, or drop the store in the fixture before yielding it."
            )
        _ragkit_after_teardown.append((type(adapter), adapter.config))
        yield

    async def assert_still_empty(self, store: Any) -> None:
        """The store is empty, and so is a new instance over the same config
        (opened after closing ``store``, which is reopened afterwards)."""
        left = await self.describe_contents(store)
        assert left == "", f"the store handed to the last test is not empty: {left}"
        async with reopened(store) as again:
            left = await self.describe_contents(again)
            assert left == "", f"a new instance over the same config is not empty: {left}"

    async def test_aaa_store_is_empty(self, adapter):
        """Canary, runs first: the store handed to the first test is empty.

        Troubleshoot: the fixture reuses a store (or a server namespace) that
        earlier runs left data in. Yield a fresh store per test: a unique
        workspace or ``tmp_path`` and ``await store.drop()`` in the teardown.
        """
        assert await self.describe_contents(adapter) == ""


class ModelContractBase(ContractBase):
    """Base of the model contracts (LLM, embedder, reranker): the capability gate."""

    @pytest_asyncio.fixture(autouse=True)
    async def _ragkit_capability_gate(self, request, adapter):
        """Skips a test marked ``@needs(Capability.X)`` unless the adapter declares X."""
        protocol = self.contract_protocol
        if not isinstance(adapter, protocol):
            pytest.fail(
                f"the `adapter` fixture yielded {adapter!r}, which lacks members of the "
                f"{protocol.__name__} protocol (ragkit.protocols.{protocol.__name__})"
            )
        cap = required_capability(self._contract_root, request.function.__name__)
        if cap is not None:
            require(adapter, cap)
        yield


# -- helpers for tests -----------------------------------------------------------------


def unique_name(base: str, tag: str) -> str:
    """A valid workspace/namespace name derived from ``base``, unique per call."""
    suffix = f"-{tag}{uuid.uuid4().hex[:8]}"
    return base[: 64 - len(suffix)] + suffix


@contextlib.asynccontextmanager
async def sibling(
    store: BaseStore, *, workspace: bool = False, namespace: bool = False, **config: Any
) -> AsyncIterator[Any]:
    """Another opened instance of the store's class: same config but a fresh
    unique workspace and/or namespace, and ``config``'s fields (``text_field``).
    Dropped and closed on exit."""
    update: dict[str, Any] = dict(config)
    if workspace:
        update["workspace"] = unique_name(store.config.workspace, "ws")
    if namespace:
        update["namespace"] = unique_name(store.config.namespace, "ns")
    other = type(store)(store.config.model_copy(update=update))
    await other.open()
    try:
        yield other
    finally:
        try:
            if not other.is_open:
                await other.open()
            await other.drop()
        finally:
            await other.close()


@contextlib.asynccontextmanager
async def reopened(store: BaseStore) -> AsyncIterator[Any]:
    """Close ``store``, open a *new* instance over the same config and yield it;
    on exit close that one and reopen ``store`` (the fixture drops it later)."""
    await store.close()
    other = type(store)(store.config)
    await other.open()
    try:
        yield other
    finally:
        await other.close()
        await store.open()


async def collect(iterator: AsyncIterator[T]) -> list[T]:
    return [item async for item in iterator]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, datetime):
        return "datetime"
    return type(value).__name__


def difference(expected: Any, actual: Any, path: str = "") -> str | None:
    """First difference between two JSON-like values, strict about types
    (``True`` is not ``1``, ``1`` is not ``1.0``); ``None`` when they are the same."""
    ke, ka = _kind(expected), _kind(actual)
    where = path or "value"
    if ke != ka:
        return f"{where}: expected {expected!r} ({ke}), got {actual!r} ({ka})"
    if ke == "dict":
        if set(expected) != set(actual):
            missing = sorted(map(repr, set(expected) - set(actual)))
            extra = sorted(map(repr, set(actual) - set(expected)))
            return f"{where}: keys differ (missing {missing}, unexpected {extra})"
        for key in expected:
            diff = difference(expected[key], actual[key], f"{path}[{key!r}]")
            if diff:
                return diff
        return None
    if ke == "list":
        if len(expected) != len(actual):
            return f"{where}: expected {len(expected)} items, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            diff = difference(e, a, f"{path}[{i}]")
            if diff:
                return diff
        return None
    if ke == "float" and math.isnan(expected) and math.isnan(actual):
        return None
    if ke == "datetime":
        if expected != actual or actual.utcoffset() != expected.utcoffset():
            return f"{where}: expected {expected!r}, got {actual!r}"
        return None
    if expected != actual:
        return f"{where}: expected {_short(expected)}, got {_short(actual)}"
    return None


def same(expected: Any, actual: Any) -> bool:
    return difference(expected, actual) is None


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"
