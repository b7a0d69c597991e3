"""The contract kit's report, ``python -m ragkit.testing.contracts`` (``make
contract-counts``): how many tests each contract holds, the protocol rules and
the tests checking each, the broken adapters the self-test runs, and the
differential state machines' budget. Needs no adapter: it counts the test
methods defined on the contract classes.

    --json     machine-readable output
    --list     also list every test method (capability-gated ones marked)
    --rules    list each protocol rule (the ids in the protocol docstrings) with
               the contract tests that check it; exit 1 when a rule has no test
               or a test names a rule no docstring states
"""

from __future__ import annotations

import argparse
import inspect
import json
from typing import Any

from ragkit.testing.contracts import CONTRACTS, CrossProtocolContract, LeaseContract
from ragkit.testing.contracts.base.broken import defect_doubles, rule_breakers
from ragkit.testing.contracts.base.checks import protocol_rules
from ragkit.testing.contracts.base.contract import contract_test_names, required_capability
from ragkit.testing.contracts.base.machine import machine_budget

MACHINE_TEST = "test_differential_state_machine"


def _cases(fn: Any) -> int:
    """Test cases a method expands to under its ``parametrize`` marks."""
    n = 1
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "parametrize":
            values = mark.args[1] if len(mark.args) > 1 else mark.kwargs.get("argvalues", [])
            n *= max(len(list(values)), 1)
    return n


def _rule_tests(cls: type) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in contract_test_names(cls):
        fn = inspect.getattr_static(cls, name)
        for rule in getattr(fn, "ragkit_rules", ()):
            out.setdefault(rule, []).append(f"{cls.__name__}.{name}")
    return out


def rule_listing() -> dict[str, Any]:
    """``{"rules": {rule: [Contract.test, ...]}, "untested": [...], "unknown": {rule: [tests]}}``."""
    stated = protocol_rules()
    tests: dict[str, list[str]] = {}
    for cls in [*CONTRACTS.values(), CrossProtocolContract, LeaseContract]:
        for rule, names in _rule_tests(cls).items():
            tests.setdefault(rule, []).extend(names)
    return {
        "rules": {rule: sorted(tests.get(rule, [])) for rule in sorted(stated)},
        "stated_in": dict(sorted(stated.items())),
        "untested": sorted(r for r in stated if not tests.get(r)),
        "unknown": {r: sorted(t) for r, t in sorted(tests.items()) if r not in stated},
    }


def summary() -> dict[str, Any]:
    contracts = []
    for kind, cls in CONTRACTS.items():
        tests = []
        for name in contract_test_names(cls):
            fn = inspect.getattr_static(cls, name)
            cap = required_capability(cls, name)
            tests.append({"name": name, "cases": _cases(fn), "capability": cap.name if cap else None})
        contracts.append(
            {
                "contract": cls.__name__,
                "kind": kind,
                "protocol": cls.contract_protocol.__name__,
                "tests": len(tests),
                "cases": sum(t["cases"] for t in tests),
                "capability_gated": sum(1 for t in tests if t["capability"]),
                "state_machine": any(t["name"] == MACHINE_TEST for t in tests),
                "test_list": tests,
            }
        )
    budget = machine_budget()
    rules = rule_listing()
    return {
        "rules": {
            "stated": len(rules["rules"]),
            "untested": rules["untested"],
            "unknown": sorted(rules["unknown"]),
            "broken_adapters": _broken_count(),
        },
        "contracts": contracts,
        "total_tests": sum(c["tests"] for c in contracts),
        "total_cases": sum(c["cases"] for c in contracts),
        "state_machines": {
            "kinds": [c["kind"] for c in contracts if c["state_machine"]],
            "examples": budget["examples"],
            "steps": budget["steps"],
            "max_steps_per_run": budget["examples"] * budget["steps"],
            "derandomize": budget["derandomize"],
        },
    }


def _broken_count() -> int:
    """Deliberately broken adapters the self-test runs the suite against (each
    kind's ``broken`` module: ``defect`` and ``violates`` doubles), one defect each."""
    return sum(len(classes) for classes in defect_doubles().values()) + len(set(rule_breakers()))


def print_rules(as_json: bool) -> int:
    listing = rule_listing()
    if as_json:
        print(json.dumps(listing, indent=2))
    else:
        for rule, tests in listing["rules"].items():
            print(f"[{rule}]  ({listing['stated_in'][rule]})")
            for name in tests:
                print(f"    {name}")
            if not tests:
                print("    NO TEST")
        for rule, tests in listing["unknown"].items():
            print(f"[{rule}] is named by {', '.join(tests)} but stated in no protocol docstring")
        n = len(listing["rules"])
        print(f"\n{n} rules, {n - len(listing['untested'])} with tests, {len(listing['untested'])} without")
    return 1 if listing["untested"] or listing["unknown"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragkit.testing.contracts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--list", action="store_true", help="list every test method")
    parser.add_argument("--rules", action="store_true", help="list rule -> tests; exit 1 if a rule has none")
    args = parser.parse_args(argv)
    if args.rules:
        return print_rules(args.json)
    data = summary()
    if args.json:
        if not args.list:
            for c in data["contracts"]:
                c.pop("test_list")
        print(json.dumps(data, indent=2))
        return 0

    width = max(len(c["contract"]) for c in data["contracts"])
    print(f"{'contract':<{width}}  {'protocol':<14} {'tests':>5} {'cases':>5} {'gated':>5}")
    for c in data["contracts"]:
        print(
            f"{c['contract']:<{width}}  {c['protocol']:<14} {c['tests']:>5} {c['cases']:>5} "
            f"{c['capability_gated']:>5}"
        )
        if args.list:
            for t in c["test_list"]:
                extra = f"  [{t['cases']} cases]" if t["cases"] > 1 else ""
                gate = f"  (needs Capability.{t['capability']})" if t["capability"] else ""
                print(f"    {t['name']}{extra}{gate}")
    print(f"{'total':<{width}}  {'':<14} {data['total_tests']:>5} {data['total_cases']:>5}")
    print()
    print("tests = test methods; cases = after parametrize; gated = skip unless the capability is declared")
    r = data["rules"]
    print()
    print(f"rules stated in the protocol docstrings: {r['stated']} ({len(r['untested'])} without a test; --rules lists them)")
    print(f"broken adapters the self-test must catch (tests/testing): {r['broken_adapters']}")
    sm = data["state_machines"]
    seed = "derandomized (CI is set: fixed seed, no example database)" if sm["derandomize"] else "random (set CI=1 to derandomize)"
    print()
    print(f"differential state machines ({', '.join(sm['kinds'])}), per adapter:")
    print(f"  examples  {sm['examples']:>5}   RAGKIT_CONTRACT_EXAMPLES")
    print(f"  steps     {sm['steps']:>5}   RAGKIT_CONTRACT_STEPS (per example)")
    print(f"  at most   {sm['max_steps_per_run']:>5}   steps per run")
    print(f"  seed      {seed}")
    return 0
