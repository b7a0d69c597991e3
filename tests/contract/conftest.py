"""Selection and policing for the contract runs in this directory.

- ``--ragkit-adapters=kv:sqlite,vector:numpy`` (or env ``RAGKIT_CONTRACT_ADAPTERS``)
  keeps only those adapters' classes; ``kv`` alone keeps every KV adapter.
- env ``RAGKIT_CONTRACT_REQUIRE=kind:name,...`` lists adapters that must be
  installed and reachable: missing ones fail ``test_required_adapters_are_installed``,
  and contract options that skip (backend unreachable) fail instead.
  Required adapters always run, whatever the selection.
- A contract test may skip only because the adapter does not declare a
  capability (or, for adapters that are not required, because its contract
  options found the backend unreachable). Any other skip is turned
  into a failure: a silently skipped contract test proves nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragkit.testing.contracts import SKIP_PREFIX
from ragkit.testing.contracts.options import contract_options

UNREACHABLE_PREFIX = "adapter not reachable: "


def parse_adapter_list(raw: str | None) -> set[str] | None:
    """``"kv:sqlite, vector"`` -> ``{"kv:sqlite", "vector"}``; ``None`` when unset."""
    if raw is None or not raw.strip():
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def selected_adapters(config: pytest.Config) -> set[str] | None:
    raw = config.getoption("ragkit_adapters", default=None)
    if raw is None:
        raw = os.environ.get("RAGKIT_CONTRACT_ADAPTERS")
    chosen = parse_adapter_list(raw)
    if chosen is not None:
        chosen |= required_adapters()
    return chosen


def required_adapters() -> set[str]:
    return parse_adapter_list(os.environ.get("RAGKIT_CONTRACT_REQUIRE")) or set()


def is_selected(key: str, chosen: set[str] | None) -> bool:
    return chosen is None or key in chosen or key.split(":", 1)[0] in chosen


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = selected_adapters(config)
    if chosen is None:
        return
    keep, drop = [], []
    for item in items:
        key = getattr(item.cls, "ragkit_adapter_key", None) if item.cls else None
        (keep if key is None or is_selected(key, chosen) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    cls = getattr(item, "cls", None)
    if report.skipped and not hasattr(report, "wasxfail") and getattr(cls, "ragkit_adapter_key", None):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if not (reason.startswith(SKIP_PREFIX) or reason.startswith(UNREACHABLE_PREFIX)):
            report.outcome = "failed"
            report.longrepr = (
                "a contract test may skip only because the adapter does not declare a "
                f"capability ('{SKIP_PREFIX}X'); this one skipped with: {reason}"
            )
    return report


@pytest.fixture
def ragkit_adapter_options(tmp_path: Path) -> Callable[[Any], dict[str, Any]]:
    """``options(info)``: the options registered for the adapter on the test
    side (``ragkit.testing.contracts.options``), or ``{}``.

    Adapters that need options to run (a server URL, credentials from the
    environment...) register them in the ``ragkit.testing`` entry-point group;
    embedded adapters need none. The options function may ``pytest.skip(...)``
    when its backend is unreachable; for an adapter listed in
    RAGKIT_CONTRACT_REQUIRE that is a failure instead.
    """

    def options(info: Any) -> dict[str, Any]:
        key = f"{info.kind}:{info.name}"
        try:
            return contract_options(info.kind, info.name, tmp_path)
        except pytest.skip.Exception as exc:
            if key in required_adapters():
                pytest.fail(f"{key} is in RAGKIT_CONTRACT_REQUIRE but is not reachable: {exc.msg}")
            pytest.skip(f"{UNREACHABLE_PREFIX}{key}: {exc.msg}")

    return options
