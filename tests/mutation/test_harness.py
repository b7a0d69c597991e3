"""The mutation harness itself (``scripts/mutation.py``), run as CI runs its
slice, on a toy project in a temporary directory: a module whose tests kill
every mutant passes; the same tests with one assertion taken out (a planted
survivor) fail, naming the surviving change; once that change is listed as
equivalent, with its reason, the slice passes again, and a full run flags an
entry that no longer matches any survivor.

Real mutmut, real pytest, in subprocesses: nothing here is simulated.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "scripts" / "mutation.py"

MODULE = '''
def describe(n):
    if n > 0:
        return "positive"
    return "not positive"
'''

TESTS = '''
from toy.sign import describe


def test_describe():
    assert describe(1) == "positive"
    assert describe(-3) == "not positive"
    assert describe(0) == "not positive"  # the boundary
'''

TARGETS = '''
[targets."toy"]
module = "toy/sign.py"
tests = ["tests/test_sign.py"]
gate = true
'''


def _project(root: Path, tests: str) -> None:
    (root / "toy").mkdir(exist_ok=True)
    (root / "toy" / "__init__.py").write_text("")
    (root / "toy" / "sign.py").write_text(textwrap.dedent(MODULE))
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "test_sign.py").write_text(textwrap.dedent(tests))
    (root / "targets.toml").write_text(TARGETS)


def _harness(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HARNESS), "--root", str(root), "--targets", str(root / "targets.toml"),
         "--equivalent", str(root / "equivalent.txt"), "--jobs", "2", *args],
        text=True, capture_output=True, timeout=600, check=False,
    )


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    _project(tmp_path, TESTS)
    return tmp_path


def test_the_slice_passes_when_every_mutant_is_killed(toy):
    done = _harness(toy, "--slice", "50")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 survived" in done.stdout and "OK" in done.stdout.splitlines()[-1]


def test_the_slice_fails_on_a_planted_survivor_and_names_it(toy):
    """The boundary assertion taken out: ``n >= 0`` now passes the tests."""
    _project(toy, TESTS.replace('    assert describe(0) == "not positive"  # the boundary\n', ""))
    done = _harness(toy, "--slice", "50")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "SURVIVED toy.sign.x_describe__mutmut_" in done.stdout
    assert "describe: if n >= 0:" in done.stdout
    assert done.stdout.splitlines()[-1] == "FAILED"

    # Reviewed and explained (here, for the test's sake): the slice passes,
    # and the full run reports it as equivalent, not as a survivor.
    lines = [line.split("describe: ", 1)[1] for line in done.stdout.splitlines() if "describe: " in line]
    (toy / "equivalent.txt").write_text(
        "# module | function | mutated line | reason\n"
        + "".join(f"toy/sign.py | describe | {line} | planted for the harness's own test\n" for line in lines)
    )
    again = _harness(toy, "--slice", "50")
    assert again.returncode == 0, again.stdout + again.stderr
    full = _harness(toy, "--report", str(toy / "report.md"))
    assert full.returncode == 0, full.stdout + full.stderr
    assert "| toy | `toy/sign.py` |" in (toy / "report.md").read_text()


def test_a_full_run_flags_an_equivalent_entry_that_matches_no_survivor(toy):
    (toy / "equivalent.txt").write_text("toy/sign.py | describe | if n != 0: | no longer in the code\n")
    done = _harness(toy, "--report", str(toy / "report.md"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "STALE equivalent entry" in done.stdout


def test_a_survivor_listed_as_equivalent_after_its_run_is_counted_so_without_a_run(toy):
    """``--rewrite-report`` judges the recorded survivors again against the
    list: whether a change can be seen is a judgement on the change, not a
    run; a survivor the list does not explain stays one."""
    scores = toy / "tests" / "mutation" / "scores.json"
    scores.parent.mkdir(parents=True)
    scores.write_text(json.dumps({"toy": {
        "module": "toy/sign.py", "mutants": 10, "killed": 7, "equivalent": 1, "survivors": 2, "score": 7 / 9,
        "gate": False, "date": "2026-12-06",
        "survivor_list": ["describe: if n >= 0:", "describe: return 'XXpositiveXX'"]}}))
    (toy / "equivalent.txt").write_text("toy/sign.py | describe | if n >= 0: | the harness's own test\n")
    done = _harness(toy, "--rewrite-report", "--report", str(toy / "report.md"))
    assert done.returncode == 0, done.stdout + done.stderr
    report = (toy / "report.md").read_text()
    assert "| toy | `toy/sign.py` | 10 | 7 | 2 | 1 | 87.5% | yes | 2026-12-06 |" in report, report
    assert "- toy: `describe: return 'XXpositiveXX'`" in report and "n >= 0" not in report, report


def test_a_stopped_run_resumes_only_while_its_inputs_are_unchanged(toy):
    """``--resume`` goes on with the run the staging directory holds: a
    verdict it has stands (not run again), a mutant it lacks one for (the run
    was stopped) runs. Once an input changed, the run starts afresh, naming it."""
    report = str(toy / "report.md")
    assert _harness(toy, "--report", report).returncode == 0
    meta_path = toy / ".mutation" / "toy" / "mutants" / "toy" / "sign.py.meta"
    meta = json.loads(meta_path.read_text())
    kept, stopped = sorted(meta["exit_code_by_key"])[:2]
    assert meta["exit_code_by_key"][kept] == 1
    # 3 (pytest's internal error) is a kill these tests never give: it marks
    # a verdict that was read back, not run again.
    meta["exit_code_by_key"].update({kept: 3, stopped: None})
    meta_path.write_text(json.dumps(meta))

    resumed = _harness(toy, "--resume", "--report", report)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming the run staged before (its inputs are unchanged)" in resumed.stdout
    codes = json.loads(meta_path.read_text())["exit_code_by_key"]
    assert (codes[kept], codes[stopped]) == (3, 1)

    (toy / "tests" / "test_sign.py").write_text(textwrap.dedent(TESTS) + "# changed\n")
    afresh = _harness(toy, "--resume", "--report", report)
    assert afresh.returncode == 0, afresh.stdout + afresh.stderr
    assert "starting afresh: 1 input(s), tests/test_sign.py, changed since the stopped run" in afresh.stdout
    assert json.loads(meta_path.read_text())["exit_code_by_key"][kept] == 1


def test_survivors_run_again_alone_once_tests_are_added_and_only_while_the_rest_holds(toy):
    """``--survivors``: after a full run left the boundary mutant alive, the
    assertion that kills it is added; only the unexplained survivors run again,
    every other verdict stands as recorded, and the score is the new one. It is
    refused once the module (or the test selection) changed since the run."""
    weak = TESTS.replace('    assert describe(0) == "not positive"  # the boundary\n', "")
    _project(toy, weak)
    report = str(toy / "report.md")
    full = _harness(toy, "--report", report)
    assert full.returncode == 1 and "1 survived" in full.stdout, full.stdout + full.stderr
    recorded = toy / ".mutation" / "toy" / "verdicts.json"
    codes = json.loads(recorded.read_text())
    (survivor,) = [n for n, c in codes.items() if c == 0]
    kept = next(n for n, c in codes.items() if c == 1)
    codes[kept] = 3  # a kill these tests never give: it marks a verdict read back, not run again
    recorded.write_text(json.dumps(codes))

    (toy / "tests" / "test_sign.py").write_text(textwrap.dedent(TESTS))  # the boundary assertion is back
    again = _harness(toy, "--survivors", "--report", report)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "running its recorded survivors again" in again.stdout and "0 survived" in again.stdout
    after = json.loads(recorded.read_text())
    assert (after[survivor], after[kept]) == (1, 3)
    assert f"| toy | `toy/sign.py` | {len(codes)} | {len(codes)} | 0 | 0 | 100.0% |" in (toy / "report.md").read_text()

    (toy / "toy" / "sign.py").write_text(textwrap.dedent(MODULE).replace("n > 0", "n > 1"))
    refused = _harness(toy, "--survivors", "--report", report)
    assert refused.returncode == 1
    assert ("ERROR toy: toy/sign.py changed since its run, so its other verdicts may not hold: run it in full"
            in refused.stdout), refused.stdout


def test_an_input_edited_during_the_run_fails_the_target_naming_it(toy, monkeypatch):
    """mutmut makes a module's mutants again when its source is newer than
    them, and the staging directory links to the working tree: verdicts from
    before an edit would be described by mutants made after it. Here a test
    writes a file of the package each time it runs."""
    touched = toy / "toy" / "touched.py"
    monkeypatch.setenv("TOY_TOUCH", str(touched))
    (toy / "tests" / "test_touch.py").write_text(
        "import os, pathlib, time\n\n\ndef test_touch():\n"
        "    pathlib.Path(os.environ['TOY_TOUCH']).write_text(repr(time.time()))\n")
    (toy / "targets.toml").write_text(TARGETS.replace('tests = ["tests/test_sign.py"]',
                                                      'tests = ["tests/test_sign.py", "tests/test_touch.py"]'))
    done = _harness(toy, "--report", str(toy / "report.md"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("ERROR toy: 1 input(s), toy/touched.py, changed during the run; its verdicts may belong to either "
            "version: run it again with the working tree left alone") in done.stdout, done.stdout
    assert touched.exists() and not (toy / "report.md").exists()


def _harness_module():
    spec = importlib.util.spec_from_file_location("mutation_harness", HARNESS)
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_harness"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_slice_rotates_through_every_mutant_in_turn():
    harness = _harness_module()
    names = [f"pkg.mod.x_f__mutmut_{i}" for i in range(25)]
    days = [harness.rotating(names, 10, day) for day in range(738000, 738003)]
    assert all(len(d) == 10 and len(set(d)) == 10 for d in days)
    assert set().union(*days) == set(names), "three days of 10 cover 25 mutants"
    assert harness.rotating(names, 10, 738000) == days[0]  # the same day, the same slice
    assert harness.rotating(names, 50, 1) == names


def test_equivalent_entries_keep_a_bar_inside_the_mutated_line(tmp_path):
    harness = _harness_module()
    path = tmp_path / "equivalent.txt"
    path.write_text("# comment\n\nm.py | C.f | last: str | None = \"\" | keys are never empty\n")
    (entry,) = harness.load_equivalents(path)
    assert (entry.module, entry.function, entry.line, entry.reason) == (
        "m.py", "C.f", 'last: str | None = ""', "keys are never empty")
    path.write_text("m.py | C.f | no reason\n")
    with pytest.raises(SystemExit, match=re.escape("expected 'module | function | mutated line | reason'")):
        harness.load_equivalents(path)


def test_an_unknown_target_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as exited:
        _harness_module().main(["--only", "kv:nope"])
    assert exited.value.code == 2
    assert "no target named kv:nope; the targets: " in capsys.readouterr().err


def _toy(root: Path, name: str, source: str, test: str, settings: str = "") -> None:
    """A toy project: module ``toy/<name>.py``, its test, and one target for
    them with ``settings`` (TOML lines) added."""
    (root / "toy").mkdir(exist_ok=True)
    (root / "toy" / "__init__.py").write_text("")
    (root / "toy" / f"{name}.py").write_text(source)
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / f"test_{name}.py").write_text(test)
    (root / "targets.toml").write_text(
        f'[targets."toy"]\nmodule = "toy/{name}.py"\ntests = ["tests/test_{name}.py"]\n{settings}')


NAP_TEST = "from toy.nap import doze, nap, rest\n\n\ndef test_nap():\n    assert (nap(), doze(), rest()) == ('rested',) * 3\n"
NAPS = "".join(f"def {name}():\n    time.sleep(0.01)\n    return 'rested'\n\n\n" for name in ("nap", "doze", "rest"))


def test_mutants_timed_out_by_a_busy_machine_are_run_again_not_counted_as_killed(tmp_path):
    """Correct but slower mutants (naps of 1.01 s instead of 0.01) pass the
    first time limit, as ones slowed down by other work would: the probes run
    again with the longer limit and finish, so the others run again too, and
    all three are reported as the survivors they are."""
    _toy(tmp_path, "nap", "import time\n\n\n" + NAPS, NAP_TEST, "time_floor = 0.2\n")
    done = _harness(tmp_path, "--report", str(tmp_path / "report.md"))
    out = done.stdout + done.stderr
    assert "3 timed out: running 2 again alone" in out, out
    assert "a probe finished (the machine was busy): running the other 1 again" in out, out
    for name in ("nap", "doze", "rest"):
        assert f"{name}: time.sleep(1.01)" in out, out
    assert out.count("SURVIVED") == 3 and "NOT JUDGED" not in out, out


def test_the_slice_counts_a_timeout_as_a_kill_without_running_it_again(tmp_path):
    """The same slowed mutants in a slice: no second run (CI's minutes), each
    timeout counted as the kill it is taken for; the full run re-judges them."""
    _toy(tmp_path, "nap", "import time\n\n\n" + NAPS, NAP_TEST, "time_floor = 0.2\ngate = true\n")
    done = _harness(tmp_path, "--slice", "100")
    out = done.stdout + done.stderr
    assert "again alone" not in out and "SURVIVED" not in out, out
    found = re.search(r"(\d+) mutants: (\d+) killed, 0 equivalent, 0 survived, 0 other", out)
    assert found and found.group(1) == found.group(2), out
    assert done.returncode == 0, out


LOOPS = """\
def up():
    i = 0
    while i < 3:
        i += 1
    return i


def down():
    n = 3
    while n > 0:
        n -= 1
    return n
"""


def test_when_every_probe_hangs_again_the_other_timeouts_stand_as_kills(tmp_path):
    """Loops whose mutants never end (``i -= 1``, ``n += 1``, ...): the first
    two timed-out mutants run again alone and hang again, so the others are
    not run a third time, and every one of them counts as killed."""
    _toy(tmp_path, "loops", LOOPS, "from toy.loops import down, up\n\n\ndef test_loops():\n    assert (up(), down()) == (3, 0)\n",
         "time_floor = 0.2\n")
    done = _harness(tmp_path, "--report", str(tmp_path / "report.md"))
    out = done.stdout + done.stderr
    found = re.search(r"(\d+) timed out: running 2 again alone", out)
    assert found and int(found.group(1)) >= 3, out
    assert f"every probe hung again: the other {int(found.group(1)) - 2} timeouts stand" in out, out
    assert "a probe finished" not in out and "NOT JUDGED" not in out, out
    assert re.search(r"14 mutants: 12 killed, 0 equivalent, 2 survived, 0 other", out), out


CHILD = '''
def shout(text):
    return text.upper() + "!"


def whisper(text):
    return text.lower() + "..."
'''

CHILD_TEST = '''
import subprocess
import sys

from toy.child import whisper


def test_whisper_here():
    assert whisper("HI") == "hi..."


def test_shout_in_a_child_process():
    code = "import sys; from toy.child import shout; print(shout(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, "hi"], capture_output=True, text=True, check=True)
    assert done.stdout == "HI!\\n"
'''


def test_mutants_reached_only_in_a_child_process_are_run_against_its_child_tests(tmp_path):
    """``shout`` runs only in a process the test starts: mutmut traces no test
    calling it, so without ``child_tests`` each of its mutants survives, marked
    "no test calls it" (``whisper``'s, called here, are killed); with them, each
    runs against those tests with its name in the environment the child
    inherits, and each is killed there."""
    _toy(tmp_path, "child", CHILD, CHILD_TEST)
    untraced = _harness(tmp_path, "--report", str(tmp_path / "report.md"))
    out = untraced.stdout + untraced.stderr
    found = re.search(r"(\d+) mutants: (\d+) killed, 0 equivalent, (\d+) survived, 0 other", out)
    assert found and "0" not in (found.group(2), found.group(3)), out
    assert out.count("(no test calls it)") == int(found.group(3)) == out.count("shout: "), out

    _toy(tmp_path, "child", CHILD, CHILD_TEST, 'child_tests = ["tests/test_child.py"]\n')
    done = _harness(tmp_path, "--report", str(tmp_path / "report.md"))
    out = done.stdout + done.stderr
    assert f"{found.group(3)} survivors: running them against the child_tests" in out, out
    assert f"{found.group(1)} mutants: {found.group(1)} killed, 0 equivalent, 0 survived, 0 other" in out, out
    assert done.returncode == 0, out


def test_a_removed_argument_is_described_by_what_was_removed():
    """mutmut's argument removals leave an empty ``+`` side, or only the
    call's closing brackets: the removed lines tell two of them apart (an
    equivalent entry for one must not explain the other)."""
    described = _harness_module()._described
    removed_filter = "--- a\n+++ a\n-                scroll_filter=self._filter(),\n"
    removed_limit = "--- a\n+++ a\n-                limit=batch,\n"
    closing = "--- a\n+++ a\n-                wait=True,\n-            ),\n+                ),\n"
    changed = "--- a\n+++ a\n-    x = 1\n+    x = 2\n"
    assert described(removed_filter) == "[removed: scroll_filter=self._filter(),]"
    assert described(removed_limit) == "[removed: limit=batch,]"
    assert described(closing) == "), [removed: wait=True, ),]"
    assert described(changed) == "x = 2"


def test_every_targets_tests_are_found_by_pytest():
    """Each test id a target names (``targets.toml``) collects at least one test:
    a misspelt class would otherwise be found only when that target's run starts,
    maybe hours into ``make mutation`` (graph:neo4j named ``TestGraph_neo``). And
    every test they collect has an id that survives being handed back to pytest."""
    targets = _harness_module().load_targets(ROOT / "tests" / "mutation" / "targets.toml")
    wanted = sorted({t for target in targets.values() for t in [*target.tests, *target.child_tests]})
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *wanted],
        cwd=ROOT, text=True, capture_output=True, timeout=600, check=False,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    collected = [line for line in run.stdout.splitlines() if "::" in line]
    unmatched = [t for t in wanted if not any(_names(t, c) for c in collected)]
    assert unmatched == []
    # mutmut hands the ids back to pytest in the process that collected them, where an
    # id pytest had to escape (non-ASCII, a backslash) is escaped again and selects
    # nothing: the slice then stops with pytest's usage error (exit 4).
    escaped = [c for c in collected if "\\" in c or not c.isascii()]
    assert escaped == [], "give these parametrized tests plain ASCII ids"


def _names(test_id: str, collected: str) -> bool:
    """Whether ``test_id`` (a folder, a file, a class or a test) selects ``collected``."""
    test_id = test_id.rstrip("/")
    return collected == test_id or (collected.startswith(test_id) and collected[len(test_id)] in "/:[")


def test_every_module_of_a_first_party_adapter_is_a_target():
    """Every module of the adapters' packages (the plugins', ``ragkit/storage``,
    ``ragkit/offline``) is some target's module, so a module added to an adapter
    is mutated too; package ``__init__`` files, ``plugin.py`` (entry points) and
    ``testing.py`` (the wire servers the tests run against) are not adapter code."""
    targets = _harness_module().load_targets(ROOT / "tests" / "mutation" / "targets.toml")
    covered = {t.module for t in targets.values()}
    plugins = sorted(init.parent for init in (ROOT / "plugins").glob("ragkit-*/ragkit_*/__init__.py"))
    packages = [*plugins, ROOT / "ragkit" / "storage", ROOT / "ragkit" / "offline"]
    modules = set()
    for package in packages:
        top = package.parent if package.parent.name != "ragkit" else package.parent.parent
        modules |= {str(f.relative_to(top)) for f in package.glob("*.py")
                    if f.name not in ("__init__.py", "plugin.py", "testing.py")}
    assert len(modules) > 40
    assert sorted(modules - covered) == []


SESSION_PLUGIN = '''
import os


def pytest_configure(config):
    os.environ["TOY_SESSION"] = str(os.getpid())
'''

SESSION_TEST = '''
import os

from toy.sign import describe


def test_describe_in_a_session_of_its_own():
    assert os.environ.get("TOY_SESSION") == str(os.getpid())  # the plugin ran in this very process
    assert describe(1) == "positive"
    assert describe(-3) == "not positive"
'''


def test_each_mutants_pytest_session_loads_the_targets_pytest_plugins(tmp_path):
    """``pytest_plugins`` load into every mutant's own session, not only the
    clean run's: the test passes only where the plugin ran in its process. Its
    boundary assertion left out, ``n >= 0`` survives (were the plugin not run
    for each mutant, every mutant would fail that check and count as killed)."""
    _toy(tmp_path, "sign", MODULE, SESSION_TEST, 'pytest_plugins = ["toy.session"]\n')
    (tmp_path / "toy" / "session.py").write_text(SESSION_PLUGIN)
    done = _harness(tmp_path, "--report", str(tmp_path / "report.md"))
    out = done.stdout + done.stderr
    assert "describe: if n >= 0:" in out and re.search(r"mutants: \d+ killed, 0 equivalent, 1 survived", out), out

    _toy(tmp_path, "sign", MODULE, SESSION_TEST)  # without the plugin: its clean run fails
    failed = _harness(tmp_path, "--report", str(tmp_path / "report.md"))
    assert failed.returncode != 0 and "TOY_SESSION" in failed.stdout + failed.stderr
