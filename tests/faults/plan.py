"""A fault trial's plan: a pure function of its seed.

A trial is a few *rounds* on one workspace. Each round starts 2-3 real
processes at once (writers: ``ragkit index`` of new or changed files, ``ragkit
delete``, a graph edit; readers: ``ragkit query``) and injects at most one
fault into it. The writers of one round touch disjoint documents, and a graph
edit has its round to itself (with a reader), so a round's operations commute:
any serial order of them gives the same stores, which is what lets the oracle
compare with one clean serial run (``oracle.py``).

Everything random is drawn here, before anything runs, so ``--replay SEED``
runs the same operations with the same faults at the same moments (when a
fault lands relative to the victim's work still depends on the machine's
timing).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

PEOPLE = ["Alice Moreau", "Bruno Keller", "Chen Wei", "Dara Okafor", "Elena Petrova", "Farid Haddad"]
COMPANIES = ["Northwind Labs", "Bluepeak Metals", "Corvid Systems", "Delta Freight"]
CITIES = ["Lisbon", "Osaka", "Toronto", "Nairobi", "Tallinn"]
N_FILES = 5
FAULTS = ("none", "kill", "kill", "stop", "model-error", "model-hang", "disk-full")
"""``kill``: SIGKILL one process; ``stop``: SIGSTOP it for a while (longer than a
server lease), then SIGCONT; ``model-error``: the embedding server answers
HTTP 500 to the next requests; ``model-hang``: it holds the next answers past
the client's timeout; ``disk-full``: the workspace's file system fills up
(embedded stores only: the servers keep their data elsewhere)."""
EDITS = ("edit_entity", "merge_entities", "create_entity", "delete_entity", "rename_entity")
QUESTIONS = [f"Who audited {c}?" for c in COMPANIES] + [f"What did {p} lead?" for p in PEOPLE]


def text(file: int, version: int) -> str:
    """A tiny document (one chunk) whose people, company and city depend on
    its version, so that a changed file changes the graph, sharing entities
    with the other files (a delete must recompute them)."""
    k = file + 2 * version
    person, other = PEOPLE[k % len(PEOPLE)], PEOPLE[(k + 3) % len(PEOPLE)]
    company, city = COMPANIES[k % len(COMPANIES)], CITIES[(file + version) % len(CITIES)]
    own = f"Project F{file}"
    return (
        f"{own} is led by {person} in {city}. {person} hired {company} to build the {own} "
        f"prototype (version {version}). {company} delivered late, so {other} audited "
        f"{company} in {city}. {other} reported to {person} about {own}.\n"
    )


@dataclass(frozen=True)
class Op:
    """One process: ``kind`` is index | delete | edit | query."""

    kind: str
    files: tuple[int, ...] = ()
    versions: tuple[int, ...] = ()
    """For index: the version each file holds when it is indexed."""
    edit: tuple = ()
    """For edit: (method, args...) of ``RAG``'s graph editing API."""
    question: str = ""

    @property
    def writer(self) -> bool:
        return self.kind != "query"

    def describe(self) -> str:
        if self.kind == "index":
            return "index " + ", ".join(f"f{f}v{v}" for f, v in zip(self.files, self.versions))
        if self.kind == "delete":
            return "delete " + ", ".join(f"f{f}" for f in self.files)
        if self.kind == "edit":
            return f"{self.edit[0]}{self.edit[1:]}"
        return f"query {self.question!r}"


@dataclass(frozen=True)
class Fault:
    kind: str
    victim: int = 0
    """Index of the round's process it hits (kill, stop, disk-full)."""
    after_lock: bool = False
    """Wait until the victim holds the writer lock, then ``delay``: lands inside its writes."""
    delay: float = 0.0
    stall: float = 0.0
    """stop: seconds stopped."""
    count: int = 0
    """model-error / model-hang: requests affected."""
    slack: int = 0
    """disk-full: bytes left free."""


@dataclass
class Round:
    ops: list[Op]
    fault: Fault


@dataclass
class Plan:
    seed: int
    rounds: list[Round] = field(default_factory=list)

    def describe(self) -> str:
        return "\n".join(
            f"  round {i}: {' | '.join(op.describe() for op in r.ops)}  fault={r.fault}"
            for i, r in enumerate(self.rounds)
        )


def make_plan(seed: int, combo: str, rounds: int | None = None) -> Plan:
    rng = random.Random(seed)
    plan = Plan(seed)
    indexed: dict[int, int] = {}  # file -> version, as the acknowledged operations leave it
    versions = [0] * N_FILES
    for number in range(rounds or rng.randint(2, 3)):
        ops = _round_ops(rng, number, indexed, versions)
        plan.rounds.append(Round(ops, _fault(rng, ops, combo)))
    return plan


def _round_ops(rng: random.Random, number: int, indexed: dict[int, int], versions: list[int]) -> list[Op]:
    if indexed and rng.random() < 0.3:  # a graph edit, with a reader beside it
        return [_edit(rng, number), Op("query", question=rng.choice(QUESTIONS))]
    ops: list[Op] = []
    free = list(range(N_FILES))
    rng.shuffle(free)
    for _ in range(rng.choice([2, 3])):
        choices = ["query"]
        if any(f not in indexed for f in free):
            choices += ["index", "index"]
        if any(f in indexed for f in free):
            choices += ["change", "delete"]
        kind = rng.choice(choices)
        if kind == "query":
            ops.append(Op("query", question=rng.choice(QUESTIONS)))
            continue
        pool = [f for f in free if (f in indexed) == (kind != "index")]
        files = sorted(rng.sample(pool, min(len(pool), rng.choice([1, 1, 2]))))
        for f in files:
            free.remove(f)
        if kind == "delete":
            ops.append(Op("delete", tuple(files)))
            for f in files:
                del indexed[f]
            continue
        if kind == "change":
            for f in files:
                versions[f] += 1
        ops.append(Op("index", tuple(files), tuple(versions[f] for f in files)))
        indexed.update({f: versions[f] for f in files})
    return ops


def _edit(rng: random.Random, number: int) -> Op:
    method = rng.choice(EDITS)
    if method == "edit_entity":
        args: tuple = (rng.choice(PEOPLE + COMPANIES), {"description": f"Edited in round {number}."})
    elif method == "merge_entities":
        a, b = rng.sample(COMPANIES, 2)
        args = ([b], a)
    elif method == "create_entity":
        args = (f"Fault Entity {number}", "concept", f"Made in round {number}.")
    elif method == "rename_entity":
        person = rng.choice(PEOPLE)
        args = (person, person + " Senior")
    else:
        args = (rng.choice(CITIES),)
    return Op("edit", edit=(method, *args))


def _fault(rng: random.Random, ops: list[Op], combo: str) -> Fault:
    kinds = [k for k in FAULTS if combo == "embedded" or k != "disk-full"]
    kind = rng.choice(kinds)
    writers = [i for i, op in enumerate(ops) if op.writer]
    victim = rng.choice(writers if writers and rng.random() < 0.8 else range(len(ops)))
    return Fault(
        kind,
        victim=victim,
        after_lock=ops[victim].writer and rng.random() < 0.75,
        delay=round(rng.uniform(0.0, 0.8) if kind != "none" else 0.0, 3),
        stall=round(rng.uniform(4.5, 5.5), 2),
        count=rng.randint(1, 6),
        slack=rng.choice([0, 4096, 16384, 65536]),
    )
