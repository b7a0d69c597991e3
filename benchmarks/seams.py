"""The figures behind "hand-written machinery or a library" (issue 27): each
seam's own cost, measured on the code as it is, next to the library that could
replace it, in one process so that both see the same load.

    python benchmarks/seams.py sync  [--calls N]        # the sync API's call overhead
    python benchmarks/seams.py ppr   [--docs N]         # the ppr mode: p50 and the PageRank itself
    python benchmarks/seams.py lock  [--rounds N]       # the writer lock's file lock: acquire + release
    python benchmarks/seams.py retry [--calls N]        # the model-call retry loop, as written and with tenacity
    python benchmarks/seams.py http  [--calls N]        # the loopback fault server against pytest-httpserver

Each writes ``benchmarks/results/seams_<part>.json`` (``--label`` is added to
the name, for a before and an after) and prints its figures.

- ``sync``: ``rag.entity(key)`` called N times through the sync twin (over
  the loop thread) against ``await rag.aentity(key)`` on a loop of the caller's
  own: the difference is what the loop thread costs per call. Next to it, the
  bare hop (a no-op coroutine) through ``call_on`` and through anyio's
  ``BlockingPortal.call``.
- ``ppr``: every passage of MuSiQue indexed with the replay LLM and the hash
  embedder (the embedded stores), then every dev question in mode ``ppr``
  (context only, the question's recorded keywords): p50/p95 of the query, the
  chunks each question got, and every ``personalized_pagerank`` input seen;
  on those inputs, the PageRank as written against ``networkx.pagerank`` and a
  scipy sparse power iteration: time per call and the largest score difference.
- ``lock``: ``FileLease`` acquire + release against ``filelock.FileLock``.
- ``retry``: ``ModelCalls.run`` per call, when the call succeeds and when it
  fails twice first (zero waits), as written and rewritten on tenacity's
  ``AsyncRetrying`` with the same policy; and the error each gives up with.
- ``http``: requests/s of one JSON route through ``LoopbackServer`` and through
  pytest-httpserver (threaded), one kept-alive httpx client, in turn and from 8
  threads. Libraries not installed are reported as such (``--site DIR`` adds a
  folder to ``sys.path``, e.g. one made with ``pip install --target``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import latency_summary, write_json  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _per_call_us(seconds: float, calls: int) -> float:
    return round(seconds / calls * 1e6, 2)


def _best_of(runs: int, fn: Any) -> float:
    """The least of ``runs`` timings of ``fn()``: the machine is shared, the floor is the code's."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# -- sync -------------------------------------------------------------------------


def run_sync(args: argparse.Namespace) -> dict[str, Any]:
    import anyio.from_thread

    from ragkit._loop_thread import LoopThread, call_on
    from ragkit.rag import RAG
    from ragkit.settings import Settings
    from ragkit.testing import HashEmbedder

    async def noop() -> None:
        return None

    n = args.calls
    with tempfile.TemporaryDirectory() as tmp:
        rag = RAG(Settings(working_dir=tmp), embedder=HashEmbedder({"dimension": 64}))
        rag.insert(["Ada Lovelace worked with Charles Babbage on the Analytical Engine in London."])
        key = rag.search_entities("Babbage")[0]
        rag.entity(key)
        sync_s = _best_of(args.runs, lambda: [rag.entity(key) for _ in range(n)])
        rag.close()

        async def awaited() -> float:
            await rag.aentity(key)

            async def batch() -> None:
                for _ in range(n):
                    await rag.aentity(key)

            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                await batch()
                times.append(time.perf_counter() - t0)
            await rag.aclose()
            return min(times)

        async_s = asyncio.run(awaited())

    thread = LoopThread()
    hop_call_on = _best_of(args.runs, lambda: [call_on(thread.loop, noop()) for _ in range(n)])
    thread.stop()
    with anyio.from_thread.start_blocking_portal() as portal:
        hop_portal = _best_of(args.runs, lambda: [portal.call(noop) for _ in range(n)])
    return {
        "calls": n, "runs": args.runs,
        "sync_entity_us": _per_call_us(sync_s, n),
        "async_entity_us": _per_call_us(async_s, n),
        "sync_overhead_us": _per_call_us(sync_s - async_s, n),
        "hop_call_on_us": _per_call_us(hop_call_on, n),
        "hop_blocking_portal_us": _per_call_us(hop_portal, n),
    }


# -- ppr --------------------------------------------------------------------------


def pagerank_networkx(nodes: Any, edges: Any, seeds: Any, damping: float) -> dict[str, float]:
    import networkx as nx

    from ragkit.query.ppr import ITERATIONS, TOLERANCE

    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from((a, b) for a, b in edges if a != b)
    restart = {k: w for k, w in seeds.items() if k in graph and w > 0}
    if not restart:
        return {}
    try:
        return nx.pagerank(graph, alpha=damping, personalization=restart, dangling=restart,
                           max_iter=ITERATIONS, tol=TOLERANCE / max(len(nodes), 1))
    except nx.PowerIterationFailedConvergence:
        return {"<no convergence>": 1.0}


def pagerank_scipy(nodes: Any, edges: Any, seeds: Any, damping: float) -> dict[str, float]:
    import numpy as np
    import scipy.sparse as sp

    from ragkit.query.ppr import ITERATIONS, TOLERANCE

    index = {n: i for i, n in enumerate(nodes)}
    n = len(nodes)
    restart = np.zeros(n)
    for key, weight in seeds.items():
        if key in index and weight > 0:
            restart[index[key]] += weight
    if not n or restart.sum() <= 0:
        return {}
    restart /= restart.sum()
    pairs = np.array([(index[a], index[b]) for a, b in edges if a in index and b in index and a != b],
                     dtype=np.int64).reshape(-1, 2)
    rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
    adjacency = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    degree = np.bincount(rows, minlength=n).astype(float)
    inverse = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
    lonely = degree == 0
    score = restart.copy()
    for _ in range(ITERATIONS):
        new = damping * (adjacency @ (score * inverse) + score[lonely].sum() * restart) + (1 - damping) * restart
        done = np.abs(new - score).sum() < TOLERANCE
        score = new
        if done:
            break
    return {k: float(score[i]) for k, i in index.items()}


async def _index_and_query(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from ragkit.query import ppr
    from ragkit.rag import RAG
    from ragkit.schema import QueryParam
    from ragkit.settings import Settings
    from ragkit.testing import HashEmbedder
    from ragkit.testing.musique_keywords import question_keywords
    from ragkit.testing.recall import passage_text
    from ragkit.testing.replay import ReplayLLM, load_musique

    corpus, _, dev = load_musique()
    passages = [passage_text(p["title"], p["text"]) for p in corpus][: args.docs or None]
    llm = ReplayLLM()
    rag = RAG(Settings(working_dir=work), llm=llm, embedder=HashEmbedder({"dimension": 384}))
    t0 = time.perf_counter()
    await rag.ainsert(passages)
    index_s = time.perf_counter() - t0
    names = llm.recording.entity_names()

    seen: list[tuple[list[str], list[tuple[str, str]], dict[str, float], float]] = []
    real = ppr.personalized_pagerank

    def recording(nodes: Any, edges: Any, seeds: Any, damping: float = ppr.DAMPING) -> dict[str, float]:
        seen.append((list(nodes), [tuple(e) for e in edges], dict(seeds), damping))
        return real(nodes, edges, seeds, damping)

    rows = []
    for rnd in range(args.rounds):
        for q in dev:
            high, low = question_keywords(q["question"], names)
            param = QueryParam(mode="ppr", only_need_context=True, enable_rerank=False,
                               high_level_keywords=high, low_level_keywords=low or high)
            if rnd == 0:
                ppr.personalized_pagerank = recording
            try:
                t0 = time.perf_counter()
                result = await rag.aquery(q["question"], param)
                seconds = time.perf_counter() - t0
            finally:
                ppr.personalized_pagerank = real
            if rnd == 0:
                rows.append({"id": q["id"], "chunks": [c["content"][:60] for c in result.chunks], "seconds": [seconds]})
            else:
                rows[[r["id"] for r in rows].index(q["id"])]["seconds"].append(seconds)
    await rag.aclose()
    for row in rows:
        row["seconds"] = min(row["seconds"])
    return {"index_s": round(index_s, 1), "rows": rows, "inputs": seen}


def run_ppr(args: argparse.Namespace) -> dict[str, Any]:
    from ragkit.query.ppr import personalized_pagerank

    with tempfile.TemporaryDirectory() as tmp:
        got = asyncio.run(_index_and_query(args, Path(tmp)))
    inputs = got.pop("inputs")
    rows = got.pop("rows")
    out: dict[str, Any] = {"docs": args.docs or "all", "index_s": got["index_s"], "questions": len(rows),
                           "query": latency_summary([r["seconds"] for r in rows]),
                           "graph_nodes": statistics.median(len(i[0]) for i in inputs),
                           "graph_edges": statistics.median(len(i[1]) for i in inputs),
                           "rankings": {r["id"]: r["chunks"] for r in rows}}
    candidates = {"as_written": personalized_pagerank, "networkx": pagerank_networkx, "scipy_sparse": pagerank_scipy}
    want = [personalized_pagerank(*i) for i in inputs]
    for name, fn in candidates.items():
        ms = [_best_of(args.runs, lambda i=i: fn(*i)) * 1e3 for i in inputs]
        diffs, same_order = [], 0
        for i, expected in zip(inputs, want):
            scores = fn(*i)
            diffs.append(max((abs(scores.get(k, 0.0) - v) for k, v in expected.items()), default=0.0))
            top = lambda s: sorted(s, key=lambda k: (-round(s[k], 12), k))[:50]  # noqa: E731
            same_order += top(scores) == top(expected)
        out[name] = {"p50_ms": round(statistics.median(ms), 3), "mean_ms": round(statistics.mean(ms), 3),
                     "max_ms": round(max(ms), 3), "max_abs_diff": max(diffs), "same_top50": same_order}
    return out


# -- lock -------------------------------------------------------------------------


def run_lock(args: argparse.Namespace) -> dict[str, Any]:
    import filelock

    from ragkit.core.lock import FileLease
    from ragkit.protocols.lease import Holder

    n = args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        lease = FileLease(Path(tmp) / ".writer.lock")
        holder = Holder(what="bench")

        async def ours() -> float:
            t0 = time.perf_counter()
            for _ in range(n):
                assert await lease.acquire(holder, 30)
                await lease.release(holder)
            return time.perf_counter() - t0

        ours_s = min(asyncio.run(ours()) for _ in range(args.runs))
        # thread_local=False: acquired and released in different worker threads, as to_thread does.
        lock = filelock.FileLock(Path(tmp) / ".other.lock", timeout=0, thread_local=False)

        async def theirs() -> float:
            t0 = time.perf_counter()
            for _ in range(n):
                await asyncio.to_thread(lock.acquire)
                await asyncio.to_thread(lock.release)
            return time.perf_counter() - t0

        theirs_s = min(asyncio.run(theirs()) for _ in range(args.runs))
    return {"rounds": n, "file_lease_us": _per_call_us(ours_s, n), "filelock_us": _per_call_us(theirs_s, n)}


# -- retry ------------------------------------------------------------------------


def _tenacity_calls() -> Any:
    """``ModelCalls`` with ``run`` on tenacity: the same policy, the same errors
    (but for the too-long ``Retry-After``, which would need one more hook)."""
    import tenacity

    from ragkit.errors import ModelError
    from ragkit.models.http import ModelCalls, classify

    class TenacityCalls(ModelCalls):
        async def run(self, call: Any) -> Any:
            def wait(state: Any) -> float:
                failure = classify(state.outcome.exception(), **self._errors)
                return self.policy.wait(state.attempt_number - 1, failure.retry_after) or 0.0

            def give_up(state: Any) -> bool:
                exc = state.outcome.exception()
                failure = classify(exc, **self._errors)
                if (isinstance(exc, ModelError) or not failure.retryable
                        or state.attempt_number > self.policy.max_retries
                        or self.policy.wait(state.attempt_number - 1, failure.retry_after) is None):
                    return True
                self.retries += 1
                return False

            retrying = tenacity.AsyncRetrying(stop=give_up, wait=wait, reraise=True)
            try:
                async for attempt in retrying:
                    with attempt:
                        async with self._slots:
                            return await call()
            except ModelError:
                raise
            except Exception as exc:
                raise self.error(exc, retrying.statistics["attempt_number"]) from exc

    return TenacityCalls


def run_retry(args: argparse.Namespace) -> dict[str, Any]:
    from types import SimpleNamespace

    from ragkit.errors import ModelError
    from ragkit.models.http import ModelCalls, RetryPolicy, Service

    class Failed(Exception):
        def __init__(self, status: int) -> None:
            super().__init__(f"HTTP {status}")
            self.response = SimpleNamespace(status_code=status, headers={"retry-after": "0"})

    service = Service("Test", "http://127.0.0.1:9/v1", "m", "check the server", timeout=5)
    policy = RetryPolicy(max_retries=4, initial_delay=0.0, max_delay=0.0)
    runners: dict[str, Any] = {"as_written": ModelCalls}
    try:
        runners["tenacity"] = _tenacity_calls()
    except ImportError:
        pass
    out: dict[str, Any] = {"calls": args.calls, "missing": [] if "tenacity" in runners else ["tenacity"]}

    async def measure(runner: Any) -> dict[str, Any]:
        state = {"n": 0}

        async def ok() -> int:
            return 1

        async def flaky() -> int:  # fails twice, then answers
            state["n"] += 1
            if state["n"] % 3:
                raise Failed(503)
            return 1

        async def down() -> int:
            raise Failed(502)

        async def timed(call: Any, n: int) -> float:
            best = float("inf")
            for _ in range(args.runs):
                t0 = time.perf_counter()
                for _ in range(n):
                    await runner.run(call)
                best = min(best, time.perf_counter() - t0)
            return best

        row = {"ok_us": _per_call_us(await timed(ok, args.calls), args.calls),
               "two_retries_us": _per_call_us(await timed(flaky, args.calls // 10), args.calls // 10)}
        try:
            await runner.run(down)
        except ModelError as exc:
            row["gives_up_with"] = str(exc)
        return row

    for name, cls in runners.items():
        out[name] = asyncio.run(measure(cls(policy, service, max_concurrency=8)))
    return out


# -- http -------------------------------------------------------------------------


def run_http(args: argparse.Namespace) -> dict[str, Any]:
    import concurrent.futures

    import httpx

    from ragkit.testing.http_server import LoopbackServer, Reply

    class Echo(LoopbackServer):
        def routes(self) -> Any:
            return {("POST", "/chat"): lambda r: Reply(json={"echo": r.body})}

    def rates(url: str) -> dict[str, int]:
        n = args.calls // 4
        with httpx.Client() as client:
            for _ in range(10):
                client.post(url, json={"x": 1})
            t0 = time.perf_counter()
            for _ in range(n):
                client.post(url, json={"x": 1}).raise_for_status()
            sequential = n / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda _: client.post(url, json={"x": 1}).raise_for_status(), range(n)))
            threads = n / (time.perf_counter() - t0)
        return {"sequential_rps": round(sequential), "threads8_rps": round(threads)}

    out: dict[str, Any] = {"requests": args.calls // 4, "loopback_server": [], "missing": []}
    try:
        import logging

        from pytest_httpserver import HTTPServer
        from werkzeug import Response

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        out["pytest_httpserver"] = []
    except ImportError:
        out["missing"].append("pytest-httpserver")
    for _ in range(args.runs):
        with Echo() as server:
            out["loopback_server"].append(rates(server.url + "/chat"))
        if "pytest_httpserver" in out:
            other = HTTPServer(threaded=True)
            other.expect_request("/chat", method="POST").respond_with_handler(
                lambda req: Response(json.dumps({"echo": req.get_json()}), content_type="application/json"))
            other.start()
            try:
                out["pytest_httpserver"].append(rates(other.url_for("/chat")))
            finally:
                other.clear()
                other.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=["sync", "ppr", "lock", "retry", "http"])
    p.add_argument("--calls", type=int, default=2000, help="sync: calls per run")
    p.add_argument("--runs", type=int, default=5, help="timings per figure (the least is kept)")
    p.add_argument("--docs", type=int, default=0, help="ppr: passages indexed (0: all)")
    p.add_argument("--rounds", type=int, default=3, help="ppr: query rounds (least per question); lock: rounds")
    p.add_argument("--label", default="", help="added to the output name (before, after)")
    p.add_argument("--site", help="a folder added to sys.path (libraries installed with pip --target)")
    args = p.parse_args()
    if args.site:
        sys.path.append(args.site)
    started = time.time()
    report = {"sync": run_sync, "ppr": run_ppr, "lock": run_lock, "retry": run_retry, "http": run_http}[args.part](args)
    report = {"part": args.part, "label": args.label, "argv": sys.argv, "python": sys.version.split()[0],
              "load_average": os.getloadavg(), "seconds": round(time.time() - started, 1), **report}
    out = RESULTS / f"seams_{args.part}{'_' + args.label if args.label else ''}.json"
    write_json(out, report)
    print(json.dumps({k: v for k, v in report.items() if k not in ("rankings", "argv")}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
