"""Prometheus metrics, on a registry of the app's own (two apps in one process
do not mix counts): requests and latencies by route template, ingestion queue
depth by workspace, LLM calls and tokens by role (``CachedLLM.stats`` of every
open workspace, plus those of workspaces already closed)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter as PCounter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ragkit.rag import RAG


class Metrics:
    def __init__(self, open_rags: Callable[[], list[RAG]], queue_depth: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry()
        self.requests = PCounter("ragkit_http_requests", "HTTP requests", ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram(
            "ragkit_http_request_seconds", "HTTP request latency (to the last byte)", ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=self.registry,
        )
        self.closed = {"calls": Counter(), "input_tokens": Counter(), "output_tokens": Counter(), "cache_hits": Counter()}
        self.open_rags = open_rags
        self.queue_depth = queue_depth
        self.registry.register(self)

    def retire(self, rag: RAG) -> None:
        """Keep a closing workspace's LLM counts (counters never go down)."""
        stats = rag._cached_llm.stats if rag._cached_llm is not None else None
        if stats is not None:
            for name, counter in self.closed.items():
                counter.update(getattr(stats, name))

    def collect(self):
        totals = {name: Counter(c) for name, c in self.closed.items()}
        for rag in self.open_rags():
            if rag._cached_llm is not None:
                for name in totals:
                    totals[name].update(getattr(rag._cached_llm.stats, name))
        calls = CounterMetricFamily("ragkit_llm_calls", "LLM calls by role (cache hits excluded)", labels=["role"])
        hits = CounterMetricFamily("ragkit_llm_cache_hits", "LLM answers served from the cache, by role", labels=["role"])
        tokens = CounterMetricFamily("ragkit_llm_tokens", "LLM tokens by role and direction", labels=["role", "direction"])
        for role, n in totals["calls"].items():
            calls.add_metric([role], n)
        for role, n in totals["cache_hits"].items():
            hits.add_metric([role], n)
        for direction in ("input", "output"):
            for role, n in totals[f"{direction}_tokens"].items():
                tokens.add_metric([role, direction], n)
        depth = GaugeMetricFamily("ragkit_ingestion_queue_depth", "Writes queued or running, by workspace", labels=["workspace"])
        for ws, n in self.queue_depth().items():
            depth.add_metric([ws], n)
        open_now = GaugeMetricFamily("ragkit_open_workspaces", "Workspaces open in the pool")
        open_now.add_metric([], len(self.open_rags()))
        yield from (calls, hits, tokens, depth, open_now)

    def describe(self):
        return []

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware): streams pass through untouched, and the
    latency is to the last byte. The route label is the template
    (``/w/{workspace}/query``), never the raw path, so labels stay bounded."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "(unmatched)"
            self.metrics.requests.labels(scope["method"], label, str(status[0])).inc()
            self.metrics.latency.labels(scope["method"], label).observe(time.perf_counter() - started)
