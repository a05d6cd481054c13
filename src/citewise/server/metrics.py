"""Prometheus metrics, one CollectorRegistry per app (two apps in one process, as in tests, never collide).

citewise_http_requests_total{method, route, status}      requests by route template (not raw path) and status
citewise_http_request_duration_seconds{method, route}    latency histogram (for SSE: until the stream ends)
citewise_answers_total{exit_reason, status, mode}         finished runs by exit reason
citewise_answer_duration_seconds{mode}                    time to a final answer
citewise_llm_cache_total{result}                          answers served from the LLM cache (hit) or not (miss)
citewise_llm_cache_hit_ratio                              hit / (hit + miss) since start
citewise_stream_disconnects_total                         SSE runs cancelled because the client went away
citewise_source_syncs_total{source, result}               source syncs by outcome (ok, failed)
citewise_source_sync_duration_seconds{source}             time one sync took
citewise_source_documents{source}                         indexed documents of a source after its last sync
citewise_source_last_success_timestamp_seconds{source}    when a source last synced without error
citewise_source_sync_running                              1 while a scheduled sync runs
citewise_feedback_total{rating}                           ratings given to answers (up, down)
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citewise.types import Answer

if TYPE_CHECKING:
    from citewise.sources.sync import SyncReport

CONTENT_TYPE = CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "citewise_http_requests", "HTTP requests by route and status.", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "citewise_http_request_duration_seconds",
            "HTTP request latency (SSE: until the stream ends).",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.answers = Counter(
            "citewise_answers", "Finished runs by exit reason.", ["exit_reason", "status", "mode"], registry=r
        )
        self.answer_latency = Histogram(
            "citewise_answer_duration_seconds",
            "Time to a final answer.",
            ["mode"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.cache = Counter("citewise_llm_cache", "Answers served from the LLM cache or not.", ["result"], registry=r)
        self.cache_ratio = Gauge("citewise_llm_cache_hit_ratio", "LLM cache hits / answers since start.", registry=r)
        self.disconnects = Counter(
            "citewise_stream_disconnects", "Streaming runs cancelled because the client disconnected.", registry=r
        )
        self.feedback = Counter("citewise_feedback", "Ratings given to answers.", ["rating"], registry=r)
        self.syncs = Counter("citewise_source_syncs", "Source syncs by outcome.", ["source", "result"], registry=r)
        self.sync_latency = Histogram(
            "citewise_source_sync_duration_seconds",
            "Time one source sync took.",
            ["source"],
            buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=r,
        )
        self.source_documents = Gauge(
            "citewise_source_documents", "Indexed documents of a source after its last sync.", ["source"], registry=r
        )
        self.source_success = Gauge(
            "citewise_source_last_success_timestamp_seconds",
            "When a source last synced without error (Unix time).",
            ["source"],
            registry=r,
        )
        self.sync_running = Gauge("citewise_source_sync_running", "1 while a scheduled sync runs.", registry=r)
        self._hits = 0
        self._total = 0

    def observe_answer(self, answer: Answer) -> None:
        mode = answer.mode or "unknown"
        self.answers.labels(exit_reason=str(answer.exit_reason), status=str(answer.status), mode=mode).inc()
        self.answer_latency.labels(mode=mode).observe(answer.timing_ms / 1000.0)
        self.cache.labels(result="hit" if answer.cached else "miss").inc()
        self._total += 1
        self._hits += bool(answer.cached)
        self.cache_ratio.set(self._hits / self._total)

    def observe_sync(self, report: SyncReport) -> None:
        self.syncs.labels(source=report.source, result="ok" if report.ok else "failed").inc()
        self.sync_latency.labels(source=report.source).observe(report.elapsed_s)
        if report.ok:
            self.source_documents.labels(source=report.source).set(report.documents)
            self.source_success.labels(source=report.source).set_to_current_time()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts and times every HTTP request. Pure ASGI (not BaseHTTPMiddleware) so streaming responses and client
    disconnects pass through untouched."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = _route_label(scope)
            method = scope.get("method", "")
            self.metrics.requests.labels(method=method, route=route, status=str(status)).inc()
            self.metrics.latency.labels(method=method, route=route).observe(time.perf_counter() - started)


def _route_label(scope: Scope) -> str:
    # The route template keeps label cardinality bounded: /api/documents/{doc_id}, never one series per id.
    route = scope.get("route")
    if isinstance(route, Mount):
        return route.name or "static"
    return getattr(route, "path", None) or "unmatched"
