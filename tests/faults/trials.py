"""Run trials one after another and collect what they found.

``run_trials`` is what ``scripts/faults.py`` and the CI slice
(``test_fault_campaign.py``) call. Trial ``k`` of a campaign with seed ``S``
has seed ``S + k``, so a failing trial replays alone with ``--replay S+k``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.rag import RAG
from ragkit.settings import load_settings

from .campaign import CampaignError, Trial, TrialFailure
from .oracle import describe_failure, judge
from .pgdb import drop_database


QUARANTINED: dict[tuple[str, int], str] = {}
"""Trials that fail for a known cause too big to fix here: they still run, and
their result says quarantined and why, instead of counting as failures."""


@dataclass
class Result:
    seed: int
    combo: str
    ok: bool
    seconds: float
    faults_landed: int
    reruns: int
    message: str = ""
    stalled_holders: int = 0


@dataclass
class Summary:
    combo: str
    results: list[Result] = field(default_factory=list)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.ok and (self.combo, r.seed) not in QUARANTINED]


def replay_command(seed: int, combo: str) -> str:
    return f"python scripts/faults.py --combo {combo} --replay {seed}"


async def run_trial(seed: int, combo: str, server, keep: Path | None = None, rounds: int | None = None) -> Result:
    root = Path(tempfile.mkdtemp(prefix=f"fault-{combo}-{seed}-", dir=keep))
    started = time.monotonic()
    trial = Trial(seed, combo, root, server, rounds)
    ok, message = True, ""
    try:
        await trial.run()
        await judge(trial)
    except TrialFailure as exc:
        ok, message = False, describe_failure(trial, exc, replay_command(seed, combo))
    except CampaignError:
        raise
    except Exception:  # a bug of the campaign itself, or an exception of ragkit's API in this process
        ok, message = False, describe_failure(trial, RuntimeError(traceback.format_exc()), replay_command(seed, combo))
    finally:
        trial.disk.unmount()
        if trial.database is not None:
            await drop_database(*trial.database)  # the trial's own database: nothing left on the server
        elif combo != "embedded":
            await _drop(trial)
    if ok:
        shutil.rmtree(root, ignore_errors=True)
    reruns = sum(o.attempts - 1 for outcomes in trial.log.outcomes for o in outcomes)
    return Result(seed, combo, ok, time.monotonic() - started, trial.log.faults_landed, reruns, message,
                  trial.log.stalled_holders)


async def _drop(trial: Trial) -> None:
    """Leave nothing behind on shared servers."""
    async with RAG(load_settings(env=trial.env).settings) as rag:
        for store in rag.stores.all():
            await store.drop()


def run_trials(seeds: list[int], combo: str, keep: Path | None = None, echo=print, rounds: int | None = None) -> Summary:
    from ragkit_openai.testing import OpenAIServer, TEST_KEY

    summary = Summary(combo)
    with OpenAIServer(api_key=TEST_KEY, dimension=32) as server:
        for seed in seeds:
            result = asyncio.run(run_trial(seed, combo, server, keep, rounds))
            summary.results.append(result)
            status = "ok" if result.ok else "FAILED"
            if (combo, seed) in QUARANTINED:
                status += f" (quarantined: {QUARANTINED[combo, seed]})"
            echo(f"trial seed={seed} combo={combo}: {status} in {result.seconds:.1f}s "
                 f"({result.faults_landed} faults landed, {result.reruns} re-runs, "
                 f"{result.stalled_holders} stalled lock holders)")
            if not result.ok:
                echo(result.message)
    return summary
