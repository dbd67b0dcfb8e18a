"""``GET /metrics``: the server's figures in the Prometheus text format.

Requests by route template (``/v1/runs/{run_id}``, never the raw path, so a
route added later is counted with no change here and ids do not multiply
the series), method and status, with a latency histogram and the requests
in flight; each model call by model, provider and status, with its latency,
the questions it carried (the rows of its batch), its tokens (read, written,
served from the model's own cache) and cost; and the decision cache's hits
and misses.

Every label comes from a closed set, so no client can grow ``/metrics``:
methods are the HTTP methods a route can have (:data:`KNOWN_METHODS`), any
other (``X123 /healthz``) is counted as ``other``; routes are the API's
templates, or ``unmatched``; statuses are the three digits the server sent.
Model, provider and currency labels are the values the server's own
models report, the first :data:`MAX_LABEL_VALUES` of each and ``other``
after them, so a stream of requests naming models cannot grow it either.

One process keeps its figures in the application's own registry. Under
``decirank serve --workers N`` every worker writes its values to files in
``PROMETHEUS_MULTIPROC_DIR`` (which the command makes, and removes) and
``/metrics``, whichever worker answers it, adds up every worker's
(prometheus_client's multiprocess mode): the variable must be set before
``prometheus_client`` is first imported, which is why the command sets it
before it starts any worker.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..decisions.failover import Attempt
from ..decisions.observers import observed_by
from ..errors import MissingAssetError

__all__ = [
    "CONTENT_TYPE",
    "KNOWN_METHODS",
    "MAX_LABEL_VALUES",
    "OTHER",
    "RequestMetrics",
    "ServerMetrics",
    "mark_worker_gone",
    "multiprocess_directory",
]

try:
    import prometheus_client
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
    from prometheus_client import multiprocess as prometheus_multiprocess
except ImportError as error:  # pragma: no cover - part of the server extra
    raise MissingAssetError("prometheus-client, for /metrics", "pip install 'decirank[server]'") from error

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
#: What prometheus_client reads, at import, to write each process's values to files.
MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

#: Seconds: a cached answer takes a millisecond, a 256-passage call to the embedded model several seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Questions per model call: one for a rank's choice, up to the model's max_questions for a rerank.
ROWS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 256)
#: The route label of a request that matched no route (a 404): one series, whatever the paths.
UNMATCHED = "unmatched"
#: The label of every value outside a label's closed set.
OTHER = "other"
#: The methods counted by name: those HTTP defines (RFC 9110) and PATCH; a made-up one is ``other``.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})
#: Distinct values kept per open-ended label (model, provider, currency); those past it are ``other``.
MAX_LABEL_VALUES = 64


def method_label(method: str) -> str:
    return method if method in KNOWN_METHODS else OTHER


def status_label(status: int) -> str:
    return str(status) if 100 <= status <= 599 else OTHER


class _FirstValues:
    """The first ``limit`` distinct values of one label as themselves, every later one as :data:`OTHER`."""

    def __init__(self, limit: int = MAX_LABEL_VALUES) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: object) -> str:
        text = str(value)
        if text in self._seen:
            return text
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(text)
        return text


def multiprocess_directory() -> str | None:
    """Where the workers' values are, when this process runs as one of several; else None."""
    return os.environ.get(MULTIPROCESS_VARIABLE) or None


class ServerMetrics:
    """The figures of one server (all its workers, in multiprocess mode); also the model calls' observer."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.requests = Counter(
            "decirank_http_requests", "HTTP requests answered.", ["method", "route", "status"], registry=registry
        )
        self.request_seconds = Histogram(
            "decirank_http_request_duration_seconds",
            "Time from a request's arrival to its last byte sent.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "decirank_http_requests_in_flight",
            "Requests being answered now.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.model_calls = Counter(
            "decirank_model_calls",
            "Model calls, each failover attempt and cache hit included.",
            ["model", "provider", "status"],
            registry=registry,
        )
        self.model_seconds = Histogram(
            "decirank_model_call_duration_seconds",
            "Duration of each model call.",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.batch_rows = Histogram(
            "decirank_model_call_questions",
            "Questions in each model call: the rows of the batch the model answers at once.",
            ["model"],
            buckets=ROWS_BUCKETS,
            registry=registry,
        )
        self.tokens = Counter(
            "decirank_model_tokens",
            "Tokens of model calls: input (read), output (written), cached (input served from the model's cache).",
            ["model", "kind"],
            registry=registry,
        )
        self.cost = Counter("decirank_model_cost", "Cost of model calls.", ["model", "currency"], registry=registry)
        self.cache_lookups = Counter(
            "decirank_decision_cache_lookups",
            "Decision cache look-ups (when the cache is on): a hit answers without calling the model.",
            ["result"],
            registry=registry,
        )
        self._model_label = _FirstValues()
        self._provider_label = _FirstValues()
        self._status_label = _FirstValues()
        self._currency_label = _FirstValues()

    def model_call(self, tool: str, attempt: Attempt, *, cache_on: bool) -> None:
        """The :class:`~decirank.decisions.observers.CallObserver` of the server's requests."""
        model = self._model_label(attempt.model)
        self.model_calls.labels(model, self._provider_label(attempt.provider), self._status_label(attempt.status)).inc()
        if cache_on:
            self.cache_lookups.labels("hit" if attempt.cached else "miss").inc()
        if attempt.cached:
            return  # no model ran: its latency, rows and tokens would count work not done
        self.model_seconds.labels(model).observe(attempt.duration)
        self.batch_rows.labels(model).observe(len(attempt.request.questions))
        usage = attempt.usage
        for kind, tokens in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cached", usage.cached_tokens),
        ):
            if tokens:
                self.tokens.labels(model, kind).inc(tokens)
        if usage.cost is not None:
            self.cost.labels(model, self._currency_label(usage.currency)).inc(usage.cost)

    def render(self) -> bytes:
        """The text exposition: this registry's, or every worker's added up in multiprocess mode."""
        if multiprocess_directory() is None:
            return prometheus_client.generate_latest(self.registry)
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)
        return prometheus_client.generate_latest(registry)


def mark_worker_gone(pid: int) -> None:
    """Drop a worker's in-flight gauge, which would otherwise count its requests forever after it ends."""
    if multiprocess_directory() is not None:
        prometheus_multiprocess.mark_process_dead(pid)


class RequestMetrics:
    """ASGI middleware: counts and times every HTTP request, and has the model calls it makes observed."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        metrics = self.metrics
        started = time.perf_counter()
        status = 499  # nothing was sent: the client left first, or shutdown cancelled the request (nginx's 499)

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        metrics.in_flight.inc()
        try:
            with observed_by(metrics):
                await self.app(scope, receive, sending)
        finally:
            metrics.in_flight.dec()
            route = _route_template(scope)
            method = method_label(scope["method"])
            metrics.requests.labels(method, route, status_label(status)).inc()
            metrics.request_seconds.labels(method, route).observe(time.perf_counter() - started)


def _route_template(scope: Scope) -> str:
    """The path template of the route the request is for, whether or not it got that far.

    The router sets ``scope["route"]`` as it matches; a request refused before
    routing (over the concurrency limit, or too large) is matched here
    against the templates of the API's schema.
    """
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str) and path:
        return path
    for pattern, template in _templates(scope.get("app")):
        if pattern.match(scope["path"]):
            return template
    return UNMATCHED


def _templates(application: Any) -> list[tuple[re.Pattern[str], str]]:
    """The application's path templates with their patterns, compiled once."""
    compiled = getattr(application.state, "route_patterns", None) if application is not None else None
    if compiled is None and application is not None:
        compiled = [(compile_path(template)[0], template) for template in application.openapi().get("paths", {})]
        application.state.route_patterns = compiled
    return compiled or []
