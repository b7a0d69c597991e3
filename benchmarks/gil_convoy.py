"""How late a loop's short sleep comes back while threads run pure Python,
at CPython's default GIL switch interval and at the server's (``SWITCH_INTERVAL``).

    python benchmarks/gil_convoy.py [--threads 3] [--seconds 8]

The loop takes the GIL back after each wait; behind busy threads it waits up
to one switch interval per thread. Prints one JSON line per run (two rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time


def burn(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i * i


async def run(interval: float, threads: int, seconds: float) -> dict:
    sys.setswitchinterval(interval)
    stop = threading.Event()
    workers = [threading.Thread(target=burn, args=(stop,)) for _ in range(threads)]
    for w in workers:
        w.start()
    loop, lags = asyncio.get_running_loop(), []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        before = loop.time()
        await asyncio.sleep(0.002)
        lags.append(loop.time() - before - 0.002)
    stop.set()
    for w in workers:
        w.join()
    lags.sort()
    return {"interval_ms": interval * 1000, "threads": threads, "sleeps": len(lags),
            "p50_ms": round(lags[len(lags) // 2] * 1000, 2), "p99_ms": round(lags[int(0.99 * len(lags))] * 1000, 2),
            "max_ms": round(lags[-1] * 1000, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    for interval in (0.005, 0.001, 0.005, 0.001):
        print(json.dumps(asyncio.run(run(interval, args.threads, args.seconds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
