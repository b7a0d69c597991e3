"""Do hidden and absent items answer in the same time? (issue 25, side channels)

    python benchmarks/acl_timing.py [--rounds 300] [--json OUT]

Starts a real ``ragkit serve`` on loopback (embedded stores, offline LLM),
indexes a public text and a text only group ``finance`` may read, then asks,
as a key without groups, for names only the hidden text holds and for names
nobody wrote, alternating them request by request so that the machine's noise
falls on both alike: ``GET /graph/entity``, ``GET /documents/{id}``,
``PATCH /graph/entity`` and ``POST /documents/delete`` (the last two answer
``404`` and change nothing). Prints per route the median and p90
milliseconds of each kind, the difference of the medians and, as the
yardstick of noise, the difference between the two halves of the absent
requests. Every request must answer ``404``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "server"))
from server_support import Server, client, wait_job  # noqa: E402

from ragkit.server.keys import KeyStore  # noqa: E402

PUBLIC = "Project Cape is a harbour project in Suzhou."
HIDDEN = "Orchid Capital funds Project Cape. Heron Legal advises Orchid Capital."


def routes(ws: str, hidden_doc: str) -> dict:
    absent_doc = "doc-" + "0" * 32
    return {
        "GET /graph/entity": (lambda c, n: c.get(f"{ws}/graph/entity", params={"name": n}), "Orchid Capital", "Plover Fund"),
        "GET /documents/{id}": (lambda c, d: c.get(f"{ws}/documents/{d}"), hidden_doc, absent_doc),
        "PATCH /graph/entity": (lambda c, n: c.patch(f"{ws}/graph/entity", json={"name": n, "description": "x"}),
                                "Heron Legal", "Nobody Known"),
        "POST /documents/delete": (lambda c, d: c.post(f"{ws}/documents/delete", json={"ids": [d]}), hidden_doc, absent_doc),
    }


def measure(c: httpx.Client, call, hidden: str, absent: str, rounds: int) -> dict:
    times: dict[str, list[float]] = {"hidden": [], "absent": []}
    for i in range(rounds):
        for kind, name in (("hidden", hidden), ("absent", absent)) if i % 2 else (("absent", absent), ("hidden", hidden)):
            started = time.perf_counter()
            r = call(c, name)
            times[kind].append((time.perf_counter() - started) * 1000)
            assert r.status_code == 404, (kind, r.status_code, r.text)
    half = len(times["absent"]) // 2
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "median_ms": {k: round(v, 3) for k, v in med.items()},
        "p90_ms": {k: round(statistics.quantiles(v, n=10)[-1], 3) for k, v in times.items()},
        "difference_ms": round(med["hidden"] - med["absent"], 3),
        "noise_ms": round(statistics.median(times["absent"][:half]) - statistics.median(times["absent"][half:]), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        working_dir = Path(tmp) / "data"
        (working_dir / "t").mkdir(parents=True)
        store = KeyStore(working_dir / "server_keys.sqlite")
        writer = store.create(["t"], "fin", ["finance"], "write")[1]
        outsider = store.create(["t"], "mallory", [], "write")[1]
        server = Server(working_dir).start()
        try:
            with client(server, writer) as c:
                wait_job(c, c.post("/w/t/documents/texts", json={"texts": [PUBLIC]}).json()["url"])
                job = wait_job(c, c.post("/w/t/documents/texts",
                                         json={"texts": [HIDDEN], "access": {"groups": ["finance"]}}).json()["url"])
            results = {}
            with client(server, outsider) as c:
                for route, (call, hidden, absent) in routes("/w/t", job["processed"][0]).items():
                    measure(c, call, hidden, absent, 20)  # warm up
                    results[route] = measure(c, call, hidden, absent, args.rounds)
                    print(f"{route:24} hidden {results[route]['median_ms']['hidden']:7.3f} ms  "
                          f"absent {results[route]['median_ms']['absent']:7.3f} ms  "
                          f"difference {results[route]['difference_ms']:+.3f} ms  (noise {results[route]['noise_ms']:+.3f} ms)")
        finally:
            server.stop()
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "cpus": os.cpu_count(), "routes": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
