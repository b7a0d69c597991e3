"""The differential state machines' base, written once for every store kind.

A machine drives random sequences of operations against a fresh store and a
plain in-memory model of it, and compares every observation. What each kind
shares lives here: the budget (``RAGKIT_CONTRACT_EXAMPLES`` x
``RAGKIT_CONTRACT_STEPS``, derandomized under ``CI``), the event loop a
machine owns, and the rules every kind runs the same way:

- ``StoreMachine``: ``drop`` (once the model holds enough to lose),
  ``reopen`` (PERSISTENT stores holding data) and the count invariant after
  every step; a kind says how big its model is, how to forget it, and how
  to compare counts;
- ``keyed_rules(...)``: for the kinds whose records are addressed by one id
  (kv, vector, doc_status), ``delete``, ``delete_existing`` and the full id
  scan, parametrized by the kind's id pool and its scan method.

Each kind's ``machine.py`` adds its own reads and writes on top.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, TypeVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from ragkit.protocols.base import BaseStore, Capability
from ragkit.testing.contracts.base.contract import collect, declared, unique_name

T = TypeVar("T")

DEFAULT_EXAMPLES = 25
DEFAULT_STEPS = 30


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"{name}={raw!r} is not an integer") from exc
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def machine_budget() -> dict[str, Any]:
    """Examples and steps of each differential state machine run (read from the
    environment every time, so a test session can change it)."""
    return {
        "examples": _env_int("RAGKIT_CONTRACT_EXAMPLES", DEFAULT_EXAMPLES),
        "steps": _env_int("RAGKIT_CONTRACT_STEPS", DEFAULT_STEPS),
        "derandomize": on_ci(),
    }


def machine_settings() -> settings:
    budget = machine_budget()
    extra: dict[str, Any] = {}
    if budget["derandomize"]:
        extra["database"] = None  # CI: a fixed seed, nothing remembered between runs
    return settings(
        max_examples=budget["examples"],
        stateful_step_count=budget["steps"],
        derandomize=budget["derandomize"],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        # Shrink to one minimal failing sequence; skip the costly "explain" phase.
        report_multiple_bugs=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        **extra,
    )


class AsyncStoreMachine(RuleBasedStateMachine):
    """Base of the differential machines: one fresh store per example, driven
    through an event loop the machine owns (hypothesis' machines are sync).

    ``factory`` builds the store (from the ``adapter`` fixture's class and
    config with a unique workspace); subclasses keep a plain in-memory model
    and compare every observation with it.
    """

    factory: ClassVar[Callable[[], Any]]

    def __init__(self) -> None:
        super().__init__()
        self._runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        self.reopens = 0
        try:
            self.store = type(self).factory()
            self.caps = declared(self.store)
            self.run(self.store.open())
        except BaseException:
            self._runner.close()
            raise

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    max_reopens: ClassVar[int] = 2

    def may_reopen(self, has_data: bool) -> bool:
        """Reopen only PERSISTENT stores holding data, at most ``max_reopens`` times
        per example (each reopen costs a full load)."""
        return Capability.PERSISTENT in self.caps and has_data and self.reopens < self.max_reopens

    def reopen_store(self) -> None:
        """Close the store and continue with a new instance over the same config."""
        self.reopens += 1
        self.run(self.store.close())
        self.store = type(self.store)(self.store.config)
        self.run(self.store.open())

    def teardown(self) -> None:
        try:
            if not self.store.is_open:
                self.run(self.store.open())
            try:
                self.run(self.store.drop())
            finally:
                self.run(self.store.close())
        finally:
            self._runner.close()


def run_machine(machine: type[AsyncStoreMachine], adapter: BaseStore) -> None:
    """Run ``machine`` on fresh instances built from the adapter fixture's class
    and config, each with a unique workspace."""
    cls, config = type(adapter), adapter.config

    def factory() -> Any:
        return cls(config.model_copy(update={"workspace": unique_name(config.workspace, "sm")}))

    bound = type(machine.__name__, (machine,), {"factory": staticmethod(factory)})
    run_state_machine_as_test(bound, settings=machine_settings())


# -- the rules every kind shares --------------------------------------------------------


class StoreMachine(AsyncStoreMachine):
    """``drop``, ``reopen`` and the count invariant, the same for every kind.

    A kind implements ``size`` (records its model holds), ``forget_all`` (what
    ``drop`` does to the model) and ``check_counts`` (the store's counts
    against the model, after every step); ``wrote`` is a hook after each
    write (doc status checks its generation there).
    """

    drop_above: ClassVar[int] = 2
    """``drop`` runs only when the model holds more than this many records."""

    def size(self) -> int:
        raise NotImplementedError

    def forget_all(self) -> None:
        raise NotImplementedError

    def check_counts(self) -> None:
        raise NotImplementedError

    def wrote(self, changed: bool) -> None:
        """Called after every write; ``changed``: the write changed records."""

    @precondition(lambda self: self.size() > self.drop_above)
    @rule()
    def drop(self):
        self.run(self.store.drop())
        self.forget_all()
        self.wrote(True)

    @precondition(lambda self: self.may_reopen(self.size() > 0))
    @rule()
    def reopen(self):
        self.reopen_store()
        self.wrote(False)

    @invariant()
    def counts_match(self):
        self.check_counts()


class KeyedMachine(StoreMachine):
    """A store whose records are addressed by one id: the model is ``{id: record}``."""

    model: dict[str, Any]

    def __init__(self) -> None:
        super().__init__()
        self.model = {}

    def size(self) -> int:
        return len(self.model)

    def forget_all(self) -> None:
        self.model.clear()

    def check_counts(self) -> None:
        assert self.run(self.store.count()) == len(self.model)


def keyed_rules(
    id_pool: st.SearchStrategy[str], *, absent: str, delete_max: int, scan: str | None = None
) -> type[KeyedMachine]:
    """The delete and scan rules of a keyed kind, over its ids ``id_pool``.

    ``absent`` is an id never written (deleting it is a no-op); ``scan`` names
    the store's full id scan (``"keys"``, ``"ids"``), ``None`` when the kind
    has none.
    """

    class KeyedRules(KeyedMachine):
        @precondition(lambda self: bool(self.model))
        @rule(data=st.data())
        def delete_existing(self, data):
            self.delete([data.draw(st.sampled_from(sorted(self.model)), label="existing id"), absent])

        @rule(ids=st.lists(id_pool | st.just(absent), max_size=delete_max))
        def delete(self, ids):
            self.run(self.store.delete(ids))
            present = [i for i in ids if i in self.model]
            for i in ids:
                self.model.pop(i, None)
            self.wrote(bool(present))

        if scan is not None:

            @rule()
            def scan_ids(self):
                found = self.run(collect(getattr(self.store, scan)()))
                assert len(found) == len(set(found)), f"{scan}() repeated an id: {sorted(found)}"
                assert set(found) == set(self.model)

    return KeyedRules
