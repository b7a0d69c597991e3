"""Randomized fault campaign: run a trial's plan (``plan.py``) with real
processes and real faults, then judge it (``oracle.py``).

A round starts its processes together (the ``ragkit`` CLI, or ``edit_op.py``
for graph edits), on a workspace of one backend combination, with the
embeddings from the ``openai`` adapter talking to a loopback OpenAI server in
this process (which the ``model-*`` faults script), and injects the round's
fault. A process that ends with 0 (or a refused edit) *acknowledged* its
operation. One that did not must have failed cleanly, and only under a fault:
a kill, a stall that cost it the lease (exit 3), or an error message naming
the cause (exit 1-3, no traceback). Its operation is then run again without
faults, as a user would, and must succeed. After each round the documents
must be exactly the acknowledged ones; after the trial, ``oracle.judge``
compares everything with a clean serial run.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.rag import RAG
from ragkit.settings import load_settings

from .pgdb import create_database, postgres_env, server_url
from .plan import Fault, Op, Plan, Round, make_plan, text

SERVERS = {"kv": "redis", "doc_status": "redis", "vector": "chroma-http", "graph": "neo4j"}
COMBOS = ("embedded", "servers", "postgres")
LEASE_TTL = 4.0
"""Server leases expire fast, so that a stall (``stop``, longer than this) costs
the stalled writer its lease and a killed holder frees the workspace quickly;
not faster: on a loaded machine an event loop can be starved for seconds."""
BUSY = 3
"""Exit status of a writer that lost the lock or waited too long: retry later."""
RERUNS = 3
MODEL_TIMEOUT = 1.5
"""The embedding client's timeout: a ``model-hang`` answer comes later."""
HANG = 4.0
PROCESS_TIMEOUT = 120.0
CLEAN_CODES = {1, 2, 3}
"""Exit codes of a run that failed with a message (``ragkit`` CLI)."""
REFUSED = 4


class CampaignError(RuntimeError):
    """The campaign cannot run (a server missing): not a finding."""


class TrialFailure(AssertionError):
    """The oracle found a problem: the message names it; the seed replays it."""


@dataclass
class Outcome:
    op: Op
    code: int | None
    err: str
    faulted: bool
    attempts: int = 1

    @property
    def acknowledged(self) -> bool:
        return self.code in (0, REFUSED)


@dataclass
class TrialLog:
    plan: Plan
    outcomes: list[list[Outcome]] = field(default_factory=list)
    """Per round, the final outcome of each writer (after its re-runs)."""
    faults_landed: int = 0
    stalled_holders: int = 0
    """``stop`` faults that stalled the writer lock's holder (seen holding it when stopped)."""
    notes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def combo_env(combo: str, root: Path, database: tuple[str, str] | None = None) -> dict[str, str]:
    """The ``RAGKIT_*`` variables of a fresh workspace on ``combo`` (for
    ``postgres``, in ``database``: the server's URL and the trial's database)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k.endswith(("_URL", "_URI"))}
    env.update(
        RAGKIT_WORKING_DIR=str(root / "data"),
        RAGKIT_WORKSPACE=f"f{uuid.uuid4().hex[:10]}",
        RAGKIT_LOCK__TIMEOUT="60",
        RAGKIT_LOCK__LEASE_TTL=str(LEASE_TTL),
        PYTHONUNBUFFERED="1",
    )
    if combo == "servers":
        env.update(server_env(root))
    elif combo == "postgres":
        assert database is not None, "a postgres trial has its database"
        env.update(postgres_env(*database))
    elif combo != "embedded":
        raise CampaignError(f"unknown combination {combo!r}: choose one of {', '.join(COMBOS)}")
    return env


def server_env(root: Path) -> dict[str, str]:
    """Redis, Chroma and Bolt from the adapters' contract options (the URLs
    ``scripts/test-services`` exports); unreachable is an error, never a skip."""
    import pytest

    from ragkit.plugins import get_registry
    from ragkit.testing.contracts.options import contract_options

    env: dict[str, str] = {}
    for kind, name in SERVERS.items():
        if name not in get_registry().names(kind):
            raise CampaignError(f"{kind} adapter {name!r} is not installed (make install)")
        try:
            options = contract_options(kind, name, root)
        except pytest.skip.Exception as exc:
            raise CampaignError(
                f"the servers combination needs {kind}:{name}, which is unreachable: {exc.msg}. "
                "Run under scripts/test-services (make faults does)."
            ) from None
        env[f"RAGKIT_{kind.upper()}"] = name
        for key, value in options.items():
            env[f"RAGKIT_{kind.upper()}__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


def model_env(url: str) -> dict[str, str]:
    from ragkit_openai.testing import TEST_KEY

    return {
        "RAGKIT_EMBEDDER": "openai",
        "RAGKIT_EMBEDDER__BASE_URL": url,
        "RAGKIT_EMBEDDER__API_KEY": TEST_KEY,
        "RAGKIT_EMBEDDER__MODEL": "text-embedding-3-small",
        "RAGKIT_EMBEDDER__DIMENSIONS": "32",
        "RAGKIT_EMBEDDER__MAX_RETRIES": "1",
        "RAGKIT_EMBEDDER__RETRY_INITIAL_DELAY": "0.1",
        "RAGKIT_EMBEDDER__TIMEOUT": str(MODEL_TIMEOUT),
    }


class Trial:
    def __init__(self, seed: int, combo: str, root: Path, server, rounds: int | None = None) -> None:
        self.plan = make_plan(seed, combo, rounds)
        self.combo = combo
        self.root = root
        self.docs = root / "docs"
        self.server = server
        self.database = (server_url(root), f"fz_{uuid.uuid4().hex[:10]}") if combo == "postgres" else None
        """postgres: (server URL, the trial's own database), created by ``run``, dropped by the caller."""
        self.env = {**combo_env(combo, root, self.database), **model_env(server.url)}
        self.log = TrialLog(self.plan)
        self.disk = Disk(root / "data")

    def path(self, file: int) -> Path:
        return self.docs / f"f{file}.txt"

    def write_files(self, op: Op) -> None:
        for f, v in zip(op.files, op.versions):
            self.path(f).write_text(text(f, v), encoding="utf-8")

    def argv(self, op: Op) -> list[str]:
        if op.kind == "index":
            return ["ragkit", "index", *map(str, map(self.path, op.files))]
        if op.kind == "delete":
            return ["ragkit", "delete", *map(str, map(self.path, op.files))]
        if op.kind == "edit":
            return ["edit_op.py", json.dumps(list(op.edit))]
        return ["ragkit", "query", op.question, "--mode", "mix"]

    async def run(self) -> TrialLog:
        self.docs.mkdir(parents=True, exist_ok=True)
        if self.database is not None:
            await create_database(*self.database)
        self.disk.mount(self.combo)  # unmounted by the caller, once the oracle has read the stores
        for number, rnd in enumerate(self.plan.rounds):
            await self.run_round(number, rnd)
            await self.check_documents(number)
        return self.log

    async def run_round(self, number: int, rnd: Round) -> None:
        self.server.reset()
        for op in rnd.ops:
            if op.kind == "index":
                self.write_files(op)
        fault = rnd.fault
        if fault.kind == "model-error":
            self.server.fail(500, times=fault.count, path="/embeddings")
        elif fault.kind == "model-hang":
            self.server.fail(None, times=fault.count, delay=HANG, path="/embeddings")
        elif fault.kind == "disk-full":
            self.disk.fill(fault.slack)
        procs = [await self.start(op, number, i, fault) for i, op in enumerate(rnd.ops)]
        landed = await self.inject(fault, procs)
        results = [await self.finish(p) for p in procs]
        if self.log.violations:
            raise TrialFailure(f"round {number}: " + "; ".join(self.log.violations))
        self.disk.free()
        self.server.reset()
        self.log.faults_landed += landed
        outcomes = []
        for i, (op, (code, err)) in enumerate(zip(rnd.ops, results)):
            faulted = fault.kind in ("model-error", "model-hang", "disk-full") or (landed and i == fault.victim)
            outcome = Outcome(op, code, err, faulted)
            self.judge_process(number, outcome)
            if op.writer:
                if not outcome.acknowledged:
                    await self.rerun(number, outcome)
                outcomes.append(outcome)
        self.log.outcomes.append(outcomes)

    async def start(self, op: Op, number: int, i: int, fault: Fault) -> Proc:
        out = self.root / f"r{number}p{i}"
        env = dict(self.env)
        if fault.kind == "disk-full" and not self.disk.mounted and i == fault.victim:
            env[FSIZE_LIMIT] = str(fault.slack + 4096)
        return Proc(self.argv(op), env, self.root, out)

    async def finish(self, proc: Proc) -> tuple[int | None, str]:
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while proc.returncode is None:
            if time.monotonic() > deadline:
                proc.send_signal(signal.SIGUSR1)  # child.py prints every thread's stack
                await asyncio.sleep(1.0)
                proc.send_signal(signal.SIGKILL)
                proc.join()
                raise TrialFailure(f"{proc.argv} hung for {PROCESS_TIMEOUT}s; its stderr:\n{proc.err_text()[-6000:]}")
            await asyncio.sleep(0.05)
        return proc.returncode, proc.err_text()

    async def inject(self, fault: Fault, procs: list) -> bool:
        """Kill or stall the victim; whether the fault hit it while it ran."""
        if fault.kind not in ("kill", "stop"):
            return fault.kind != "none"
        victim = procs[fault.victim]
        if fault.after_lock:
            if not await self.wait_for_writer(victim):
                return False
            await asyncio.sleep(fault.delay)
        else:
            await asyncio.sleep(1.0 + 6 * fault.delay)  # the CLI takes a second or more to start
        if victim.returncode is not None:
            return False
        if fault.kind == "kill":
            victim.send_signal(signal.SIGKILL)
            return True
        victim.send_signal(signal.SIGSTOP)
        stopped = asyncio.Event()
        watch = asyncio.create_task(self.watch_holder(stopped))
        await asyncio.sleep(fault.stall)
        victim.send_signal(signal.SIGCONT)
        stopped.set()
        self.judge_stall(victim, await asyncio.wait_for(watch, PROCESS_TIMEOUT))
        return True

    async def watch_holder(self, stopped: asyncio.Event) -> list[int | None]:
        """The writer lock's holder (its pid, None when free), sampled while
        the victim is stopped: only answers that came back before ``stopped``
        was set count. A task of its own: reading the lock must never delay
        the SIGCONT (opening the stores may wait for the stopped process)."""
        seen: list[int | None] = []
        settings = load_settings(env=self.env).settings
        async with RAG(settings) as rag:
            while not stopped.is_set():
                holder = await rag.stores.lock.lease.holder()
                if stopped.is_set():
                    break
                seen.append(holder.pid if holder is not None else None)
                await asyncio.sleep(0.1)
        return seen

    def judge_stall(self, victim: Proc, seen: list[int | None]) -> None:
        """No overlapping writers. On the servers combination a stalled holder
        loses its lease to the next writer and must write nothing more (its
        exit 3 and the stores show it). On PostgreSQL the lock is a session's
        advisory lock, with no expiry: a stalled holder keeps its session, so
        it keeps the lock for the whole stall and nobody else may take it."""
        if not seen or seen[0] != victim.pid:
            return  # the victim did not hold the lock when stopped (or the first read came after SIGCONT)
        self.log.stalled_holders += 1
        # None is a read that found the lock free (the stalled lease expired, nobody took it yet).
        others = sorted({pid for pid in seen if pid is not None and pid != victim.pid})
        freed = None in seen
        if self.combo == "postgres" and (others or freed):
            # Raised once the round's processes have ended (run_round), never with them running.
            self.log.violations.append(
                f"the writer lock left the stalled holder (pid {victim.pid}) while it was stopped: "
                f"held by {others or 'nobody'} ({len(seen)} reads): two writers could overlap"
            )
        after = others or ("nobody" if freed else "the victim only")
        self.log.notes.append(f"stall of holder {victim.pid}: lock then held by {after}")

    async def wait_for_writer(self, proc: Proc, timeout: float = 60.0) -> bool:
        """Until ``proc`` holds the writer lock: false if it ends first."""
        settings = load_settings(env=self.env).settings
        async with RAG(settings) as rag:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.returncode is None:
                holder = await rag.stores.lock.lease.holder()
                if holder is not None and holder.pid == proc.pid:
                    return True
                await asyncio.sleep(0.02)
        return False

    def judge_process(self, number: int, outcome: Outcome) -> None:
        where = f"round {number}, {outcome.op.describe()}"
        if outcome.acknowledged:
            return
        err = outcome.err
        if outcome.code == -signal.SIGKILL:
            err = ORPHAN_WORKER.sub("", err)
        if "Traceback" in err:
            raise TrialFailure(f"{where}: crashed with a traceback (exit {outcome.code}):\n{outcome.err[-3000:]}")
        if not outcome.faulted:
            raise TrialFailure(f"{where}: failed without a fault (exit {outcome.code}):\n{outcome.err[-3000:]}")
        if outcome.code not in CLEAN_CODES and outcome.code != -signal.SIGKILL:
            raise TrialFailure(f"{where}: ended with {outcome.code} under a fault:\n{outcome.err[-3000:]}")

    async def rerun(self, number: int, outcome: Outcome) -> None:
        """What a user does after a failed command: run it again (no faults
        now), and again while it says the workspace was busy (exit 3)."""
        self.write_files(outcome.op)
        for _ in range(RERUNS):
            proc = await self.start(outcome.op, number, 9 + outcome.attempts, Fault("none"))
            outcome.code, outcome.err = await self.finish(proc)
            outcome.attempts += 1
            outcome.faulted = False
            if outcome.code != BUSY:
                break
        if outcome.op.kind == "delete" and outcome.code == 2 and "nothing was deleted" in outcome.err:
            # The killed attempt had deleted them (what the round's check verifies):
            # a re-run finds nothing to delete, as it would for a user.
            outcome.code = 0
        if not outcome.acknowledged:
            raise TrialFailure(
                f"round {number}, {outcome.op.describe()}: the re-run without faults failed "
                f"(exit {outcome.code}):\n{outcome.err[-3000:]}"
            )

    async def check_documents(self, number: int) -> None:
        """Nothing acknowledged lost, nothing deleted back: the stored documents
        are exactly the indexed files' current versions."""
        from .oracle import stored_documents

        want = expected_documents(self.plan.rounds[: number + 1], self.path)
        got = await stored_documents(load_settings(env=self.env).settings)
        if got != want:
            raise TrialFailure(f"after round {number}: stored documents {got} != acknowledged {want}")


def expected_documents(rounds: list[Round], path) -> dict[str, str]:
    """file path -> content, after these rounds' operations."""
    docs: dict[str, str] = {}
    for rnd in rounds:
        for op in rnd.ops:
            if op.kind == "index":
                docs.update({str(path(f)): text(f, v) for f, v in zip(op.files, op.versions)})
            elif op.kind == "delete":
                for f in op.files:
                    docs.pop(str(path(f)), None)
    return docs


ORPHAN_WORKER = re.compile(
    r"Traceback \(most recent call last\):\n(?:  .*\n)*?.*in spawn_main\n(?:  .*\n)*?EOFError: Ran out of input\n"
)
"""What a ``spawn`` worker of the killed process prints (to the stderr it
inherited) when the kill came after it started and before its parent sent it
its start-up data: the offline LLM's process pool (``ragkit/offline/llm.py``)
starts one on first use. Seed 1086 (postgres) failed on it; the worker is
not the victim, and only a SIGKILLed victim's output is cleared of it."""
FSIZE_LIMIT = "FAULTS_FSIZE_LIMIT"
"""Set for the victim of a disk-full fault when no tmpfs can be mounted."""
_CONTEXT = None


def forkserver():
    """multiprocessing's forkserver, with ragkit imported (``child.py``)."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload([__name__.rsplit(".", 1)[0] + ".child"])
    return _CONTEXT


class Proc:
    """One process of a round: its pid, signals and exit status."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, out: Path) -> None:
        from . import child

        self.argv = argv
        self.err_path = Path(f"{out}.err")
        self._p = forkserver().Process(target=child.run, args=(argv, env, str(cwd), f"{out}.out", str(self.err_path)))
        self._p.start()
        self.pid = self._p.pid

    @property
    def returncode(self) -> int | None:
        return self._p.exitcode

    def send_signal(self, sig: int) -> None:
        if self._p.exitcode is None:
            os.kill(self.pid, sig)

    def join(self) -> None:
        self._p.join()

    def err_text(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""


class Disk:
    """A full disk: the embedded workspace lives on a small tmpfs whose size is
    cut down to what it holds (plus ``slack``) for a round, when this process
    may mount one (root); otherwise the victim process gets a file size limit
    (``RLIMIT_FSIZE``, writes past it fail with EFBIG)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.mounted = False

    def mount(self, combo: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0 or combo != "embedded":
            return
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(self.folder)], capture_output=True)
        self.mounted = done.returncode == 0

    def fill(self, slack: int) -> None:
        if self.mounted:
            st = os.statvfs(self.folder)
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            self._resize(max(used + slack, 4096))

    def free(self) -> None:
        if self.mounted:
            self._resize(64 << 20)

    def _resize(self, size: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.folder)], check=True, capture_output=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.folder)], capture_output=True)
            self.mounted = False
