#!/usr/bin/env python3
"""The randomized fault campaign (issue 26; docs/faults.md).

    python scripts/faults.py --combo embedded --trials 100 --seed 1000
    python scripts/test-services python scripts/faults.py --combo servers --trials 100
    python scripts/test-services python scripts/faults.py --combo postgres --trials 100
    python scripts/faults.py --combo embedded --replay 1042      # one trial again

Each trial draws a few rounds of operations (index, change, delete, graph
edits, queries) run as 2-3 real processes at once, with a fault in most rounds
(kill -9, SIGSTOP, an embedding server that errors or hangs, a full disk), then
checks the oracle (tests/faults/oracle.py). Trial k has seed SEED + k. A failing
trial prints its seed, its plan, where its logs are kept and the command that
replays it. ``--json FILE`` writes every trial's result.

Exit status: 0 every trial passed; 1 some failed; 2 the campaign could not run
(e.g. the servers or postgres combination without its servers: run it under
scripts/test-services, as ``make faults`` does).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.faults.campaign import COMBOS, CampaignError  # noqa: E402
from tests.faults.trials import run_trials  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--combo", choices=COMBOS, default="embedded")
    parser.add_argument("--seed", type=int, default=1000, help="seed of the first trial (default 1000)")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--replay", type=int, metavar="SEED", help="run the one trial of this seed")
    parser.add_argument("--keep", type=Path, help="folder for the trials' workspaces and logs (default: the temp dir)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    seeds = [args.replay] if args.replay is not None else list(range(args.seed, args.seed + args.trials))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    try:
        summary = run_trials(seeds, args.combo, args.keep, echo=lambda s: print(s, flush=True))
    except CampaignError as exc:
        print(f"faults: error: {exc}", file=sys.stderr)
        return 2
    failed = summary.failures
    print(f"{len(summary.results)} trials on {args.combo}, seeds {seeds[0]}..{seeds[-1]}: {len(failed)} failed"
          + (f" (seeds {', '.join(str(r.seed) for r in failed)})" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in summary.results], indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
