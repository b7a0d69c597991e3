#!/usr/bin/env python
"""Mutation testing of the first-party adapters against the contract suite.

mutmut (3.8, pinned in the test extra) writes the bugs: each mutant is one
small change to one function of an adapter's module, and it is run against
the tests the target names (its contract class, the cross-protocol contract
where it applies, and the adapter's own tests). A mutant no test fails on
*survived*: either a rule and a test are missing, or the change cannot be
seen (it is *equivalent*) and ``tests/mutation/equivalent.txt`` says why.

    scripts/mutation.py                    # every target, every mutant; writes docs/mutation.md
    scripts/mutation.py --only kv:sqlite   # one target (the others' rows are kept)
    scripts/mutation.py --only vector:chroma --resume   # go on where a stopped run ended
    scripts/mutation.py --only vector:chroma --survivors  # only its last run's survivors, again
    scripts/mutation.py --slice 12         # CI: 12 mutants per gated target, rotating daily
    scripts/mutation.py --rewrite-report   # the report again; recorded survivors now listed
                                           # as equivalent count as such (no run)

Why mutmut and not cosmic-ray (8.7): on ``ragkit/storage/sqlite_kv.py`` and
its contract class, mutmut made 124 mutants and ran them in 2 min 28 s,
cosmic-ray 65 in 8 min 21 s. mutmut collects the tests once, forks per
mutant and runs only the tests that call the mutated function; cosmic-ray
starts pytest for every mutant. mutmut's string and argument mutants are also
the ones that found this suite's gaps.

Targets are in ``tests/mutation/targets.toml``. Each runs in its own staging
directory (``.mutation/<target>/``: links to the sources and tests, and the
project's pyproject.toml with a ``[tool.mutmut]`` table), from a fresh copy,
so no result is ever read from an earlier run, with one exception:
``--resume`` goes on with a stopped run (one target's mutants can take longer
than a sitting) only when nothing its verdicts depend on has changed since it
was staged (``inputs``: every file of the module's package, the core, the tests
and their directories, the installed packages, the mutmut table); otherwise it
starts afresh and says which input changed. ``--survivors`` runs again only
the mutants a target's finished run left alive, after tests were added for
them: the other verdicts stand, so it is refused when the module's package,
the core, the installed packages or the tests it selects (mutmut would judge
every mutant again) changed since; the tests in those paths may change. A
test weakened since could let a recorded kill through unseen: the next full
run, and CI's slice meanwhile, would find it.

The slice runs only *gated* targets (those whose full run left no survivor
unexplained) and fails on any survivor not in the equivalent list: a change
that lets a bug through where none got through before. Its mutants are
a window over a fixed shuffle that moves each day (``--day``), so successive days
try the next ones: every mutant of a target is tried within mutants/N days.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = str(Path(sys.executable).parent / "mutmut")
KILLED = {1, 3, 36, 37, 24, -24, 152, 255, -9, -11}
"""mutmut's exit codes for a mutant some test caught: failed, pytest internal
error, timeout (a mutant that hangs is caught), type check, killed by signal."""
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}
"""Exit codes of mutants nothing caught. "No tests" is a survivor too: no
selected test calls the mutated function at all."""
TARGET_SCORE = 0.95
SCORES = Path("tests/mutation/scores.json")
"""Each target's last full run, from which the report is written."""
REPORT_SURVIVORS = 25
TIMEOUT_MULTIPLIER = 4.0
"""A mutant's time limit (wall clock, mutmut's timer) is this x (its tests'
clean time + the target's ``time_floor``, ``TIME_FLOOR`` unless it says more)."""
TIME_FLOOR = 10.0
"""Seconds added to every mutant's clean time. mutmut's clean time sums each
test's call alone: the collection of the tests and every fixture's setup and
teardown, which each mutant's run pays too, are not in it (sqlite-base's
tests: 18.5 s counted, 39 s on the clock). With 1 s, correct mutants of
such targets timed out by the dozen."""
TIMEOUTS = {24, -24, 152}
"""Exit codes of a mutant stopped by its time limit."""
RETRY_MULTIPLIER = 8.0
"""Timed-out mutants run once more, alone, with this multiplier: on a busy
machine a correct but slowed mutant times out too, and a timeout counts as a
kill. Only a mutant that times out again (one that hangs) is caught."""
PROBES = 2
"""How many of a target's timed-out mutants run again first. A hang costs its
whole limit, and one function's mutants often hang by the dozen (a lock's
timeout made 1,000 times longer): when every probe times out again, the run
was not slowed by other work, and the other timeouts stand as kills (a mutant
that makes its tests 4x slower on a quiet machine is caught: slowness is a
behaviour too). When a probe finishes, the machine was busy: all run again."""


class TargetError(Exception):
    """mutmut could not run a target (its clean tests fail, say)."""


@dataclass
class Target:
    name: str
    module: str
    tests: list[str]
    gate: bool = False
    also: list[str] = field(default_factory=list)
    time_floor: float = TIME_FLOOR
    """Seconds added to a mutant's clean test time before its time limit is
    computed: more where a mutant's tests do work the clean run had done
    already (models loaded, pools started) and would otherwise be cut short."""
    source: str | None = None
    """Where the module's package lives in the repository, when not at its top
    (a plugin's: ``plugins/ragkit-redis/ragkit_redis``); it is linked at the
    staging directory's top, where mutmut puts the mutated copy on sys.path."""
    isolation: str = "fork"
    """mutmut's ``process_isolation``: ``fork`` (each mutant's process forked
    from the one that ran the tests for their coverage) or ``forkserver``
    (forked from a process that ran none): for clients that do not survive a
    fork of a process that used them (chromadb's)."""
    pytest_plugins: list[str] = field(default_factory=list)
    """Modules loaded into each mutant's pytest session (``-p``): a fixture
    of the whole session, such as a server of its own where a mutant can
    break a shared one for the mutants after it."""
    child_tests: list[str] = field(default_factory=list)
    """Tests that reach the module in a child process (a worker it spawns, a
    process a test starts). mutmut traces which tests call a function in the
    test process only, so it runs no test, or not these, for a mutant there:
    every mutant that survives its run is run against these too, with its
    name in the environment, which the child inherits (``run_in_children``)."""

    @property
    def slug(self) -> str:
        return re.sub(r"[^0-9A-Za-z_.-]", "_", self.name)

    @property
    def dotted(self) -> str:
        return self.module.removesuffix(".py").replace("/", ".")


@dataclass
class Equivalent:
    module: str
    function: str
    line: str
    reason: str
    used: bool = False


@dataclass
class Outcome:
    target: Target
    killed: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)
    survivors: dict[str, str] = field(default_factory=dict)  # name -> "function: mutated line"
    other: dict[str, int] = field(default_factory=dict)  # not checked, skipped, suspicious: exit code

    @property
    def mutants(self) -> int:
        return len(self.killed) + len(self.equivalent) + len(self.survivors) + len(self.other)

    @property
    def score(self) -> float:
        """Killed among the mutants that are not equivalent."""
        judged = self.mutants - len(self.equivalent)
        return len(self.killed) / judged if judged else 1.0


def load_targets(path: Path) -> dict[str, Target]:
    data = tomllib.loads(path.read_text())
    return {name: Target(name=name, **spec) for name, spec in data["targets"].items()}


def load_equivalents(path: Path) -> list[Equivalent]:
    """``module | function | mutated line | reason``, one per line; ``#`` comments."""
    out = []
    for number, raw in enumerate(path.read_text().splitlines(), 1) if path.exists() else []:
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = raw.split(" | ")
        if len(parts) < 4 or not parts[-1].strip():
            raise SystemExit(f"{path}:{number}: expected 'module | function | mutated line | reason', got {raw!r}")
        out.append(Equivalent(parts[0].strip(), parts[1].strip(), _squash(" | ".join(parts[2:-1])), parts[-1].strip()))
    return out


def _squash(text: str) -> str:
    return " ".join(text.split())


def explained(equivalents: list[Equivalent], module: str, function: str, line: str) -> Equivalent | None:
    """The entry of the equivalent list for this mutated line, if any."""
    return next((e for e in equivalents if (e.module, e.function, e.line) == (module, function, line)), None)


def function_of(target: Target, mutant: str) -> str:
    """``ragkit.storage.sqlite_kv.xǁSQLiteKVStoreǁ_fill__mutmut_13`` -> ``SQLiteKVStore._fill``."""
    local = mutant.removeprefix(target.dotted + ".").rsplit("__mutmut_", 1)[0]
    if local.startswith("xǁ"):
        return ".".join(local[2:].split("ǁ"))
    return local.removeprefix("x_")


def stage(target: Target, root: Path, *, resume: bool = False) -> Path:
    """A fresh staging directory for ``target``: links to the sources and
    tests, and pyproject.toml with the target's mutmut table. With ``resume``,
    the one an earlier run left is kept, its results with it, if its inputs
    are unchanged: only the table is written again (a timeout's retry
    raised its multiplier)."""
    where = root / ".mutation" / target.slug
    table = _table(target, root)
    if resume and (where / "inputs.json").exists():
        changed = changed_inputs(target, root, where)
        if not changed:
            (where / "pyproject.toml").write_text(table)
            print("   resuming the run staged before (its inputs are unchanged)", flush=True)
            return where
        print(f"   starting afresh: {changed} changed since the stopped run", flush=True)
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    package = target.module.split("/", 1)[0]
    (where / package).symlink_to(root / (target.source or package))
    for name in dict.fromkeys(["tests", *target.also]):
        (where / name).parent.mkdir(parents=True, exist_ok=True)  # a plugin's tests: plugins/<p>/tests
        (where / name).symlink_to(root / name)
    (where / "pyproject.toml").write_text(table)
    (where / "inputs.json").write_text(json.dumps(inputs(target, root, table), indent=0, sort_keys=True))
    return where


def restage(target: Target, root: Path) -> Path:
    """The staging directory of ``target``'s finished run, to run its survivors
    again (``--survivors``): refused when what its other verdicts rest on
    changed since: the module's package, the core, the installed packages,
    the mutmut table (its test selection: mutmut would forget every verdict)."""
    where = root / ".mutation" / target.slug
    if not (where / "inputs.json").exists() or not (where / "mutants" / (target.module + ".meta")).exists():
        raise TargetError(f"{target.name}: no staged run to take survivors from; run it in full first")
    if any(code is None for code in verdicts(target, where).values()):
        raise TargetError(f"{target.name}: its staged run did not finish; finish it with --resume first")
    old = json.loads((where / "inputs.json").read_text())
    table = _table(target, root)
    current = inputs(target, root, table)
    fixed = (f"{target.source or target.module.split('/', 1)[0]}/", "ragkit/", "(")
    changed = sorted(k for k in current.keys() | old.keys() if k.startswith(fixed) and current.get(k) != old.get(k))
    if changed:
        raise TargetError(f"{target.name}: {', '.join(changed[:5])} changed since its run, so its other verdicts "
                          "may not hold: run it in full")
    (where / "pyproject.toml").write_text(table)  # a timeout retry's longer limit, undone
    (where / "inputs.json").write_text(json.dumps(current, indent=0, sort_keys=True))
    print("   running its recorded survivors again (module, core and test selection unchanged)", flush=True)
    return where


def changed_inputs(target: Target, root: Path, where: Path) -> str:
    """The inputs that differ from those ``where`` was staged with, named
    (the first five), or an empty string."""
    old, current = json.loads((where / "inputs.json").read_text()), inputs(target, root, _table(target, root))
    changed = sorted(k for k in current.keys() | old.keys() if current.get(k) != old.get(k))
    if not changed:
        return ""
    return f"{len(changed)} input(s), {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''},"


def _table(target: Target, root: Path) -> str:
    """The project's pyproject.toml with the target's ``[tool.mutmut]`` table."""
    package = target.module.split("/", 1)[0]
    table = {
        "source_paths": [package],
        "only_mutate": [target.module],
        "pytest_add_cli_args_test_selection": target.tests,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", *(a for p in target.pytest_plugins for a in ("-p", p)),
                                "-x", "-q"],
        "also_copy": target.also,  # mutmut runs the tests from its copy: what they need must be in it
        # A mutant that loops forever is caught by its time limit: mutmut's
        # default (30x the tests' time) spends minutes on each.
        "timeout_multiplier": TIMEOUT_MULTIPLIER,
        "timeout_constant": target.time_floor,
        "process_isolation": target.isolation,
    }
    text = (root / "pyproject.toml").read_text() if (root / "pyproject.toml").exists() else ""
    return text + "\n[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items())


def inputs(target: Target, root: Path, table: str) -> dict[str, str]:
    """What a mutant's verdict depends on, each with a digest: every file of
    the module's package and of the core (``ragkit/``, the contract suite),
    each test path's directory (its helpers) with the conftest.py files
    above it, the ``also`` paths, the installed packages and the mutmut table."""
    paths = [root / (target.source or target.module.split("/", 1)[0]), root / "ragkit"]
    for test in [*target.tests, *target.child_tests, *target.also]:
        path = root / test.split("::", 1)[0]
        folder = path if path.is_dir() else path.parent
        paths += [folder, *(p / "conftest.py" for p in folder.parents if p.is_relative_to(root))]
    files = {f for p in paths if p.exists() for f in ([p] if p.is_file() else p.rglob("*"))
             if f.is_file() and not _scratch(f.relative_to(root))}
    digest = {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(files)}
    packages = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    digest["(installed packages)"] = hashlib.sha256("\n".join(packages).encode()).hexdigest()
    digest["(mutmut table)"] = hashlib.sha256(table.encode()).hexdigest()
    return digest


def _scratch(path: Path) -> bool:
    """Files runs write (bytecode, hypothesis's examples, mutmut's staging,
    the scores), not inputs."""
    return path == SCORES or any(part == "__pycache__" or part.startswith(".") for part in path.parts)


def _mutmut(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # CI=1: the contract's state machines are derandomized, so a mutant is
    # killed or not the same way on every run.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CI": "1"}
    return subprocess.run([MUTMUT, *args], cwd=where, env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False)


_GENERATE = """
from pathlib import Path
from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants
Path("mutants").mkdir(exist_ok=True)
copy_src_dir(); copy_also_copy_files(); create_mutants(1)
"""


def mutant_names(target: Target, where: Path) -> list[str]:
    """Every mutant of the target's module, generated without running a test."""
    done = subprocess.run([sys.executable, "-c", _GENERATE], cwd=where, text=True, capture_output=True, check=False)
    if done.returncode:
        raise TargetError(f"{target.name}: mutmut could not generate mutants:\n{done.stdout}{done.stderr}")
    return sorted(_meta(target, where)["exit_code_by_key"])


def _meta(target: Target, where: Path) -> dict:
    return json.loads((where / "mutants" / (target.module + ".meta")).read_text())


def rotating(names: list[str], count: int, day: int) -> list[str]:
    """``count`` of ``names``: a window that moves by ``count`` each day over
    a fixed shuffle, so every mutant is tried within len/count days."""
    if count >= len(names):
        return list(names)
    shuffled = sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    start = day * count % len(shuffled)
    return (shuffled + shuffled)[start : start + count]


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, names = sys.argv[1], json.loads(sys.stdin.read())
print(json.dumps({n: get_diff_for_mutant(n, path=path) for n in names}))
"""


def mutated_lines(target: Target, where: Path, names: list[str]) -> dict[str, str]:
    """Each mutant's changed lines (the ``+`` side of ``mutmut show``), in one process."""
    if not names:
        return {}
    done = subprocess.run([sys.executable, "-c", _DIFFS, target.module], cwd=where, input=json.dumps(names),
                          text=True, capture_output=True, check=False)
    if done.returncode:
        raise TargetError(f"{target.name}: mutmut could not show the mutants:\n{done.stderr}")
    return {name: _described(diff) for name, diff in json.loads(done.stdout).items()}


def _described(diff: str) -> str:
    """The ``+`` side, squashed; where an argument was removed it is empty or
    only brackets (one for every argument of every call), so the removed
    lines follow in ``[removed: ...]``."""
    def side(mark: str) -> str:
        return _squash(" ".join(line[1:] for line in diff.splitlines()
                                if line.startswith(mark) and not line.startswith(mark * 3)))

    plus = side("+")
    if re.fullmatch(r"[)\]},\s]*", plus):
        return f"{plus} [removed: {side('-')}]".lstrip()
    return plus


def verdicts(target: Target, where: Path) -> dict[str, int | None]:
    """Each mutant's exit code as the staged run judged it: what the harness
    recorded (``verdicts.json``: mutmut forgets the timeouts of a run that
    repeated others), else mutmut's own record."""
    recorded = where / "verdicts.json"
    return json.loads(recorded.read_text()) if recorded.exists() else _meta(target, where)["exit_code_by_key"]


def run_target(target: Target, root: Path, equivalents: list[Equivalent], *, count: int | None,
               day: int, jobs: int, resume: bool = False, survivors: bool = False) -> Outcome:
    if survivors:
        where = restage(target, root)
        before = verdicts(target, where)
        chosen = sorted(before)
        ran = _unexplained(target, where, equivalents, chosen, before)
    else:
        where = stage(target, root, resume=resume)
        names = mutant_names(target, where)
        chosen = names if count is None else rotating(names, count, day)
        ran = chosen
    # A full run names no mutant: mutmut then runs those without a verdict (what --resume relies on).
    named = ran if count is not None or survivors else []
    done = _mutmut(where, "run", "--max-children", str(jobs), *named) if ran else None
    if done is not None:
        (where / "run.log").write_text(done.stdout)
    codes = _meta(target, where)["exit_code_by_key"]
    if survivors:  # the others' verdicts as recorded (mutmut may have forgotten timeouts)
        codes = {**before, **{n: codes.get(n) for n in ran}}
    if done is not None and (done.returncode or all(codes.get(n) is None for n in ran)):
        tail = "\n".join(done.stdout.splitlines()[-25:])
        raise TargetError(f"{target.name}: mutmut failed (exit {done.returncode}; log {where / 'run.log'}):\n{tail}")
    if count is None:
        # The slice takes a timeout as the kill it is counted as: running it
        # again (minutes on CI's busy machine) could only turn it into a
        # survivor, which the full run, the one that scores, finds.
        codes = _retry_timeouts(target, where, codes, [n for n in ran if codes.get(n) in TIMEOUTS]) or codes
    # The staging directory links to the working tree, and mutmut makes the
    # mutants again when a source is newer: an edit during the run (a retry's
    # or a child's) would mix two versions' mutants, numbered alike.
    changed = changed_inputs(target, root, where)
    if changed:
        raise TargetError(f"{target.name}: {changed} changed during the run; its verdicts may belong to "
                          "either version: run it again with the working tree left alone")
    outcome = Outcome(target)
    lines = mutated_lines(target, where, [n for n in chosen if codes.get(n) in SURVIVED])
    if target.child_tests:
        codes = {**codes, **run_in_children(target, where, _unexplained(target, where, equivalents, chosen, codes))}
    if count is None:
        (where / "verdicts.json").write_text(json.dumps({n: codes.get(n) for n in chosen}, indent=0, sort_keys=True))
    for name in chosen:
        code = codes.get(name)
        if code in KILLED:
            outcome.killed.append(name)
        elif code in SURVIVED:
            function, line = function_of(target, name), lines[name]
            match = explained(equivalents, target.module, function, line)
            if match:
                match.used = True
                outcome.equivalent.append(name)
            else:
                outcome.survivors[name] = f"{function}: {line}" + ("  (no test calls it)" if code != 0 else "")
        else:
            outcome.other[name] = code
    return outcome


def _unexplained(target: Target, where: Path, equivalents: list[Equivalent], names: list[str],
                 codes: dict[str, int | None] | None = None) -> list[str]:
    """The survivors among ``names`` that no entry of the equivalent list explains."""
    codes = codes if codes is not None else _meta(target, where)["exit_code_by_key"]
    lines = mutated_lines(target, where, [n for n in names if codes.get(n) in SURVIVED])
    return [n for n in lines if not explained(equivalents, target.module, function_of(target, n), lines[n])]


CHILD_KILLED, CHILD_TIMEOUT = 1, 24
"""The exit codes ``run_in_children`` records: mutmut's for a failed test and a timeout."""


def run_in_children(target: Target, where: Path, names: list[str]) -> dict[str, int]:
    """Each mutant's exit code against ``target.child_tests``: pytest in a new
    process, from mutmut's copy of the sources (first on the path, for the
    children too), with ``MUTANT_UNDER_TEST`` set. Each run's limit is
    ``RETRY_MULTIPLIER`` x the clean run's time plus the target's floor."""
    if not names:
        return {}
    copy = where / "mutants"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x", "-q", *target.child_tests]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CI": "1",
           "PYTHONPATH": os.pathsep.join([str(copy), *filter(None, [os.environ.get("PYTHONPATH")])])}

    log = where / "children.log"

    def run(mutant: str, limit: float | None) -> int | None:
        """pytest's exit code, or None when it ran out of ``limit``."""
        # Its own session, and output to a file: a child the tests started that
        # outlives them (a hung worker) is killed with them and holds no pipe.
        with log.open("w") as out, subprocess.Popen(command, cwd=copy, env={**env, "MUTANT_UNDER_TEST": mutant},
                                                    stdout=out, stderr=subprocess.STDOUT,
                                                    start_new_session=True) as proc:
            try:
                return proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                return None
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)

    started = time.monotonic()
    if run("", None) != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        raise TargetError(f"{target.name}: its child_tests fail with no mutant ({log}):\n{tail}")
    limit = RETRY_MULTIPLIER * (time.monotonic() - started) + target.time_floor
    print(f"   {len(names)} survivors: running them against the child_tests ({limit:.0f} s limit each)", flush=True)
    codes = {}
    for name in names:
        code = run(name, limit)
        # A timeout is a kill, as mutmut's are: a hang is caught.
        codes[name] = CHILD_TIMEOUT if code is None else 0 if code == 0 else CHILD_KILLED
    return codes


def _retry_timeouts(target: Target, where: Path, first: dict, names: list[str]) -> dict | None:
    """Run timed-out mutants again, alone, with a longer limit
    (``RETRY_MULTIPLIER``): first ``PROBES`` of them, then the rest only if a
    probe did not time out again. Every mutant's exit code then (``first``:
    the first pass's), or None if nothing timed out."""
    if not names:
        return None
    text = (where / "pyproject.toml").read_text()
    (where / "pyproject.toml").write_text(
        text.replace(f"timeout_multiplier = {json.dumps(TIMEOUT_MULTIPLIER)}",
                     f"timeout_multiplier = {json.dumps(RETRY_MULTIPLIER)}")
    )
    # The longest-running first: their limit has the least room over what
    # mutmut's clean time leaves out, so they are the likeliest to be slow, not hung.
    estimated = _meta(target, where)["estimated_durations_by_key"]
    names = sorted(names, key=lambda n: (-estimated.get(n, 0.0), n))
    probes, rest = names[:PROBES], names[PROBES:]
    codes, logs = dict(first), []

    def again(batch: list[str]) -> None:
        logs.append(_mutmut(where, "run", "--max-children", "1", *batch).stdout)
        # Only the batch's codes: mutmut forgets the timeouts of a run it was not asked to repeat.
        meta = _meta(target, where)["exit_code_by_key"]
        codes.update({n: meta.get(n) for n in batch})

    print(f"   {len(names)} timed out: running {len(probes)} again alone with {RETRY_MULTIPLIER:g}x "
          "their clean time", flush=True)
    again(probes)
    if rest and any(codes[n] not in TIMEOUTS for n in probes):
        print(f"   a probe finished (the machine was busy): running the other {len(rest)} again", flush=True)
        again(rest)
    elif rest:
        print(f"   every probe hung again: the other {len(rest)} timeouts stand", flush=True)
    (where / "retry.log").write_text("\n".join(logs))
    return codes


def write_report(outcomes: dict[str, dict], targets: dict[str, Target], path: Path) -> None:
    lines = [
        "# Mutation testing of the first-party adapters",
        "",
        "Generated by `scripts/mutation.py` (`make mutation`); do not edit by hand.",
        "Every module of the adapters (each store, lease and model client, and the modules",
        "they share: base classes, filter translators, loaders) is a target, mutated by mutmut;",
        "every mutant runs against the tests its target names (`tests/mutation/targets.toml`).",
        "*Equivalent*: the change cannot be observed; each is listed with its reason in",
        "`tests/mutation/equivalent.txt`. *Score*: killed among the others",
        f"(target: {TARGET_SCORE:.0%}). A mutant that hits its time limit ({TIMEOUT_MULTIPLIER:g}x its",
        f"tests' clean time plus {TIME_FLOOR:g} s) is killed if it also does when run again alone with {RETRY_MULTIPLIER:g}x:",
        f"{PROBES} of a target's timeouts run again first, and the rest only if one of those",
        "finishes (the machine was busy). *Gated*: CI's slice (`make mutation-slice`) tries a rotating",
        "subset of its mutants and fails on any new survivor (it counts a timeout as a kill, with no",
        "second run). mutmut traces calls in the test",
        "process only: where a module runs in a child process too (a worker it spawns), its",
        "target's `child_tests` run again for each survivor, the mutant named in the",
        "environment the child inherits. Where one mutant could break a shared server for the",
        "others (FalkorDB's Bolt listener hangs after a GOODBYE), each mutant's test session",
        "starts a server of its own (`pytest_plugins`).",
        "",
        "| target | module | mutants | killed | equivalent | survivors | score | gated | run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(targets):
        row = outcomes.get(name)
        if row is None:
            lines.append(f"| {name} | `{targets[name].module}` | not run yet | | | | | no | |")
            continue
        lines.append(
            f"| {name} | `{row['module']}` | {row['mutants']} | {row['killed']} | {row['equivalent']} | "
            f"{row['survivors']} | {row['score']:.1%} | {'yes' if targets[name].gate else 'no'} | {row['date']} |"
        )
    lines += ["", _summary(outcomes, targets)]
    if any(row["survivor_list"] for row in outcomes.values()):
        lines += ["", "## Survivors not yet killed or explained", "",
                  f"The first {REPORT_SURVIVORS} of each target; `scripts/mutation.py --only TARGET` prints them all.", ""]
    for name, row in sorted(outcomes.items()):
        left = row["survivor_list"]
        lines += [f"- {name}: `{s}`" for s in left[:REPORT_SURVIVORS]]
        if len(left) > REPORT_SURVIVORS:
            lines.append(f"- {name}: ... and {len(left) - REPORT_SURVIVORS} more")
    path.write_text("\n".join(lines) + "\n")


def _summary(outcomes: dict[str, dict], targets: dict[str, Target]) -> str:
    """One line under the table: how many targets meet the score, and which do not yet."""
    below = sorted(n for n in targets if n in outcomes and outcomes[n]["score"] < TARGET_SCORE)
    unrun = sorted(n for n in targets if n not in outcomes)
    met = len(targets) - len(below) - len(unrun)
    parts = [f"{met} of {len(targets)} targets at {TARGET_SCORE:.0%} or more"]
    if below:
        parts.append(f"below it: {', '.join(below)}")
    if unrun:
        parts.append(f"not run yet: {', '.join(unrun)}")
    return "; ".join(parts) + "."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=ROOT, help="the project (default: this repository)")
    p.add_argument("--targets", type=Path, default=None, help="default: ROOT/tests/mutation/targets.toml")
    p.add_argument("--equivalent", type=Path, default=None, help="default: ROOT/tests/mutation/equivalent.txt")
    p.add_argument("--only", action="append", default=None, help="a target's name (repeatable)")
    p.add_argument("--slice", type=int, default=None, metavar="N",
                   help="CI: N mutants per gated target instead of all mutants of every target")
    p.add_argument("--day", type=int, default=None,
                   help="the slice's rotation: a day number (default: today's, UTC; date.toordinal())")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="mutants run at once")
    p.add_argument("--report", type=Path, default=None, help="full runs: default ROOT/docs/mutation.md")
    p.add_argument("--resume", action="store_true",
                   help="full runs: go on with the run a target's staging directory holds, where nothing "
                        "its verdicts depend on has changed since (otherwise start afresh)")
    p.add_argument("--survivors", action="store_true",
                   help="full runs: run again only the survivors no equivalent entry explains, from a target's "
                        "finished staged run, after tests were added in the paths it selects (refused when its "
                        "module, the core or its test selection changed)")
    p.add_argument("--rewrite-report", action="store_true",
                   help="only rewrite the report from tests/mutation/scores.json (after editing targets, "
                        "or listing survivors as equivalent)")
    args = p.parse_args(argv)
    root = args.root.resolve()
    targets = load_targets(args.targets or root / "tests/mutation/targets.toml")
    equivalents = load_equivalents(args.equivalent or root / "tests/mutation/equivalent.txt")
    if args.rewrite_report:
        _record(root, args.report or root / "docs/mutation.md", {}, targets, rejudge=equivalents)
        return 0
    unknown = sorted(set(args.only or ()) - targets.keys())
    if unknown:
        p.error(f"no target named {', '.join(unknown)}; the targets: {', '.join(sorted(targets))}")
    chosen = [targets[n] for n in args.only] if args.only else list(targets.values())
    if args.slice is not None:
        chosen = [t for t in chosen if t.gate]
    if args.survivors and (args.slice is not None or args.resume):
        p.error("--survivors takes a finished full run: not with --slice or --resume")
    day = args.day if args.day is not None else datetime.datetime.now(datetime.UTC).date().toordinal()
    failed = False
    outcomes = {}
    for target in chosen:
        print(f"== {target.name}: {target.module}", flush=True)
        started = time.monotonic()
        try:
            outcome = run_target(target, root, equivalents, count=args.slice, day=day, jobs=args.jobs,
                                 resume=args.resume and args.slice is None, survivors=args.survivors)
        except TargetError as exc:  # the others still run; the run fails
            print(f"   ERROR {exc}", flush=True)
            failed = True
            continue
        outcomes[target.name] = outcome
        print(f"   {outcome.mutants} mutants: {len(outcome.killed)} killed, {len(outcome.equivalent)} equivalent, "
              f"{len(outcome.survivors)} survived, {len(outcome.other)} other; score {outcome.score:.1%}; "
              f"{time.monotonic() - started:.0f} s", flush=True)
        for name, what in outcome.survivors.items():
            print(f"   SURVIVED {name}\n            {what}")
        for name, code in outcome.other.items():
            print(f"   NOT JUDGED {name} (mutmut exit {code})")
        if args.slice is not None:
            failed |= bool(outcome.survivors or outcome.other)
        else:
            failed |= outcome.score < TARGET_SCORE or (target.gate and bool(outcome.survivors))
            # Recorded target by target: an interrupted run keeps what it finished.
            _record(root, args.report or root / "docs/mutation.md", {target.name: outcome}, targets)
    if args.slice is None:
        failed |= _stale(chosen, equivalents)
    print("FAILED" if failed else "OK", flush=True)
    return 1 if failed else 0


def _stale(chosen: list[Target], equivalents: list[Equivalent]) -> bool:
    """Entries of a fully run target that matched no surviving mutant: the
    code they explain changed, so they must be reviewed again."""
    modules = {t.module for t in chosen}
    stale = [e for e in equivalents if e.module in modules and not e.used]
    for e in stale:
        print(f"STALE equivalent entry (no such surviving mutant): {e.module} | {e.function} | {e.line}")
    return bool(stale)


def _record(root: Path, report: Path, outcomes: dict[str, Outcome], targets: dict[str, Target],
            rejudge: list[Equivalent] | None = None) -> None:
    scores = root / SCORES
    kept = json.loads(scores.read_text()) if scores.exists() else {}
    for row in kept.values() if rejudge else ():
        _rejudge(row, rejudge)
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    for name, o in outcomes.items():
        kept[name] = {
            "module": o.target.module, "mutants": o.mutants, "killed": len(o.killed),
            "equivalent": len(o.equivalent), "survivors": len(o.survivors) + len(o.other),
            "score": o.score, "gate": o.target.gate, "date": today,
            "survivor_list": sorted(o.survivors.values()),
        }
    scores.parent.mkdir(parents=True, exist_ok=True)
    scores.write_text(json.dumps(kept, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    report.parent.mkdir(parents=True, exist_ok=True)
    write_report({n: row for n, row in kept.items() if n in targets}, targets, report)


def _rejudge(row: dict, equivalents: list[Equivalent]) -> None:
    """A recorded run's survivors that an entry of the equivalent list now
    explains count as equivalent: whether a change can be observed is judged
    on the change, so it needs no new run (a new test's kills do)."""
    left = []
    for survivor in row["survivor_list"]:
        function, _, line = survivor.partition(": ")
        if explained(equivalents, row["module"], function, line):
            row["equivalent"] += 1
            row["survivors"] -= 1
        else:
            left.append(survivor)
    row["survivor_list"] = left
    judged = row["mutants"] - row["equivalent"]
    row["score"] = row["killed"] / judged if judged else 1.0


if __name__ == "__main__":
    sys.exit(main())
