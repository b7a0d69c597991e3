"""The fault campaign's oracle: what must hold after a trial.

1. ``ragkit check`` finds nothing (``check`` is what the command runs).
2. Nothing acknowledged is lost and nothing deleted comes back: the stored
   documents are exactly the current versions of the files whose last
   acknowledged operation indexed them, all processed (checked after every
   round by the campaign, with ``stored_documents``).
3. Every store equals the stores of one clean serial run of the acknowledged
   operations, made in this process on the embedded stores with no faults
   (``store_snapshot``: graph elements with their properties, the ids in
   every other store, each document's status), and a graph edit was refused
   in the trial exactly when the serial run refuses it.
"""

from __future__ import annotations

from ragkit.errors import GraphEditError
from ragkit.pipeline.check import check
from ragkit.rag import RAG
from ragkit.schema import DocStatus
from ragkit.settings import Settings, load_settings
from ragkit.testing.snapshot import store_snapshot

from .campaign import Outcome, Trial, TrialFailure, model_env


async def stored_documents(settings: Settings) -> dict[str, str]:
    """file path -> content of the stored documents; any document that is not
    processed (pending, mid-delete...) or has no text is a failure."""
    async with RAG(settings) as rag:
        stores = rag.stores
        ids = [k async for k in stores.full_docs.keys()]
        records = {r.id: r for r in await stores.doc_status.get(ids) if r is not None}
        statuses = {}
        for status in DocStatus:
            page = await stores.doc_status.list_page(status, 1000, None)
            statuses.update({r.id: r.status.value for r in page.items})
        unsettled = {i: s for i, s in statuses.items() if s != DocStatus.PROCESSED.value}
        if unsettled or set(statuses) != set(ids):
            raise TrialFailure(f"documents not settled: statuses {statuses}, texts of {sorted(ids)}")
        docs = await stores.full_docs.get_many(ids)
        return {d["file_path"]: d["content"] for i, d in zip(ids, docs) if records[i].file_path}


async def judge(trial: Trial) -> None:
    """Raise ``TrialFailure`` naming the first difference from the oracle."""
    settings = load_settings(env=trial.env).settings
    async with RAG(settings) as rag:
        problems = (await check(rag.stores)).problems
        if problems:
            raise TrialFailure(f"ragkit check: {[(p.kind, p.item, p.detail) for p in problems]}")
        got = await store_snapshot(rag.stores)
    want, refusals = await serial_run(trial)
    for outcomes, expected in zip(trial.log.outcomes, refusals):
        for outcome, refused in zip(outcomes, expected):
            # A re-run edit may be refused because the next write finished the
            # interrupted attempt (a rename finds the old name gone): the stores decide.
            if outcome.attempts == 1 and (outcome.code == 4) != refused:
                raise TrialFailure(
                    f"{outcome.op.describe()}: {'refused' if outcome.code == 4 else 'done'} in the trial, "
                    f"{'refused' if refused else 'done'} in the serial run:\n{outcome.err[-2000:]}"
                )
    if got != want:
        raise TrialFailure("stores differ from the serial run:\n" + diff(got, want))


async def serial_run(trial: Trial) -> tuple[dict, list[list[bool]]]:
    """The acknowledged operations, one after the other, on a fresh embedded
    workspace; the snapshot, and per round which writers were refused."""
    env = {"RAGKIT_WORKING_DIR": str(trial.root / "serial"), **model_env(trial.server.url)}
    settings = load_settings(env=env).settings
    refusals: list[list[bool]] = []
    async with RAG(settings) as rag:
        for rnd, outcomes in zip(trial.plan.rounds, trial.log.outcomes):
            refusals.append([await _apply(rag, trial, o) for o in outcomes])
        return await store_snapshot(rag.stores), refusals


async def _apply(rag: RAG, trial: Trial, outcome: Outcome) -> bool:
    op = outcome.op
    if op.kind == "index":
        trial.write_files(op)
        await rag.ainsert(paths=[str(trial.path(f)) for f in op.files])
    elif op.kind == "delete":
        await rag.adelete([str(trial.path(f)) for f in op.files])
    else:
        method, *args = op.edit
        kwargs = args.pop() if args and isinstance(args[-1], dict) else {}
        try:
            await getattr(rag, "a" + method)(*args, **kwargs)
        except GraphEditError:
            return True
    return False


def diff(got: dict, want: dict, limit: int = 12) -> str:
    lines = []
    for part in sorted(set(got) | set(want)):
        a, b = got.get(part), want.get(part)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                if a.get(key) != b.get(key):
                    lines.append(f"  {part}[{key!r}]: trial {a.get(key)!r}\n      serial {b.get(key)!r}")
        else:
            extra, missing = sorted(set(a or []) - set(b or [])), sorted(set(b or []) - set(a or []))
            lines.append(f"  {part}: only in the trial {extra}, only in the serial run {missing}")
    return "\n".join(lines[:limit]) + (f"\n  ... {len(lines) - limit} more" if len(lines) > limit else "")


def describe_failure(trial: Trial, exc: BaseException, replay: str) -> str:
    return (
        f"FAILED trial seed={trial.plan.seed} combo={trial.combo}: {exc}\n"
        f"plan:\n{trial.plan.describe()}\n"
        f"logs: {trial.root}\nreplay: {replay}"
    )

