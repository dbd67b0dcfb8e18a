"""The page at ``/``: a playground for the tools and a reader for the run log.

The page is three small hand-written files in ``static/`` (no build step, no
network at run time) served by the same process as the API. It calls the
public ``/v1`` endpoints with the user's key, plus the few read-only ones
here that it needs and the API did not have:

- ``GET /v1/server``: what the page may offer (the default model, whether
  ``exec:`` evaluators are allowed, whether the run log is on);
- ``GET /v1/models``: every model ``decirank models`` lists, each marked
  with whether a request to this server may name it;
- ``GET /v1/runlog/runs``: the run table, with item counts and a model filter;
- ``GET /v1/runlog/series``: latency (p50/p95) and cost per model over time;
- ``POST /v1/example-artifacts``: stores the two artifacts score_list's example
  scores (fixed texts, each stored only if its ref is free) and names them.

The page and its assets hold no data, so they are served without a key;
every endpoint above wants the key when the server has one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response

from .._config import load_config
from .._version import __version__
from ..backends import providers
from ..decisions.roles import resolve_chain, role_names
from ..stores.artifacts import ArtifactStore
from ..stores.runlog import RUN_STATUSES, _percentile, current_runlog
from ..tools._evaluators.validate import BUILTIN_TYPES
from ._deps import GuardedRoute, error_responses, needs_api_key, settings_of

__all__ = ["page_router"]

_ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
# The page is its own: nothing is loaded from elsewhere, and no other site may frame it.
_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache",
}

page_router = APIRouter(route_class=GuardedRoute)
page_api = APIRouter(route_class=GuardedRoute, dependencies=[Depends(needs_api_key)])


@cache
def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


@page_router.get("/", include_in_schema=False)
def index() -> Response:
    return Response(_asset("index.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)


@page_router.get("/static/{name}", include_in_schema=False)
def asset(name: str) -> Response:
    if name not in _ASSETS:
        raise HTTPException(status_code=404, detail="no such asset")
    return Response(_asset(name), media_type=_ASSETS[name], headers=_HEADERS)


@page_api.get("/v1/server", responses=error_responses(401), tags=["page"])
def server(request: Request) -> dict[str, Any]:
    """What this server offers: its default model, whether exec: evaluators may run, whether runs are logged."""
    settings = settings_of(request)
    evaluators = ["score", "validate"] + (["exec"] if settings.allow_exec else [])
    return {
        "version": __version__,
        "model": settings.model,
        "allow_exec": settings.allow_exec,
        "evaluators": evaluators,
        "validation_types": sorted(BUILTIN_TYPES),
        "runlog": current_runlog() is not None,
    }


@page_api.get("/v1/models", responses=error_responses(401), tags=["page"])
def models(request: Request) -> dict[str, Any]:
    """Every provider's models and every role, as ``decirank models`` lists them.

    ``usable`` says whether a request may name the model: a model that calls
    another server may be used only as the server's own ``--model``.
    """
    default = settings_of(request).model
    listed = []
    for provider in providers():
        remote = "base_url" in provider.options
        for name in provider.models:
            full = f"{provider.name}:{name}"
            usable = not remote or full == default or (name == provider.default_model and provider.name == default)
            listed.append(
                {
                    "name": full,
                    "provider": provider.name,
                    "usable": usable,
                    "note": None if usable else "calls another server; only the server's own --model may",
                    "description": provider.description,
                }
            )
    config = load_config()
    roles = {name: resolve_chain(name, config).full_model_names() for name in role_names(config)}
    return {"default": default, "roles": roles, "models": listed}


#: What score_list's example scores: a valid and a broken JSON answer of one run, by ref.
EXAMPLE_ARTIFACTS = {
    "example-run/valid-json": '{"name": "decirank", "tools": ["rank", "rerank", "filter"]}',
    "example-run/broken-json": '{"name": "decirank", "tools": ["rank", "rerank"',
}
EXAMPLE_EVALUATOR = "validate:json"


@page_api.post("/v1/example-artifacts", responses=error_responses(401), tags=["page"])
def example_artifacts() -> dict[str, Any]:
    """Store score_list's example artifacts where their refs are free, and name them with their evaluator.

    The texts are fixed, so this writes nothing a caller chose; an artifact already stored under
    one of the refs is kept as it is.
    """
    with ArtifactStore() as store:
        for ref, text in EXAMPLE_ARTIFACTS.items():
            if store.get(ref) is None:
                store.put(ref, text)
    return {"refs": list(EXAMPLE_ARTIFACTS), "evaluator": EXAMPLE_EVALUATOR}


#: A run status, as the run log knows them.
RunStatus = Literal[RUN_STATUSES]  # type: ignore[valid-type]

_MORE = re.compile(r"^… \(\+(\d+) more\)$")
_LIST_INPUTS = ("items", "documents", "texts", "refs")


def _item_count(inputs: Any) -> int | None:
    """How many items a tool run was given (a batch: its input's rows), read from its (shortened) inputs."""
    if not isinstance(inputs, dict):
        return None
    if isinstance(inputs.get("rows"), int) and not isinstance(inputs["rows"], bool):
        return inputs["rows"]
    for key in _LIST_INPUTS:
        value = inputs.get(key)
        if isinstance(value, list):
            if value and isinstance(value[-1], str) and (more := _MORE.match(value[-1])):
                return len(value) - 1 + int(more.group(1))
            return len(value)
    return None


def _runlog_or_404() -> Any:
    runlog = current_runlog()
    if runlog is None:
        raise HTTPException(status_code=404, detail="the run log is off on this server")
    runlog.flush()
    return runlog


# The run log is read with blocking I/O, so these run in FastAPI's thread pool (plain ``def``).
@page_api.get("/v1/runlog/runs", responses=error_responses(401, 422), tags=["page"])
def runlog_runs(
    request: Request,
    limit: int = Query(100, ge=1, le=1000),
    tool: str | None = None,
    model: str | None = None,
    status: RunStatus | None = None,
) -> dict[str, Any]:
    """Tool runs, newest first, with how many items each was given; ``model`` keeps runs that called it.

    Also the tools, models and statuses the log holds, for the page's filters.
    """
    request.state.input_location = "query"
    runlog = current_runlog()
    if runlog is None:
        return {"enabled": False, "runs": [], "tools": [], "models": [], "statuses": list(RUN_STATUSES)}
    found = runlog.runs(limit=limit, tool=tool or None, status=status or None, model=model or None, with_inputs=True)
    # The inputs are read only to count the items: the list itself stays small.
    rows = []
    for row in found:
        inputs = row.pop("inputs")
        rows.append({**row, "items": _item_count(inputs)})
    database = runlog.database
    tools = [r["tool"] for r in database.query("SELECT DISTINCT tool FROM runs WHERE kind = 'tool' ORDER BY tool")]
    used = [r["model"] for r in database.query("SELECT DISTINCT model FROM runs WHERE kind = 'model' ORDER BY model")]
    return {
        "enabled": True,
        "runs": rows,
        "tools": [t for t in tools if t],
        "models": [m for m in used if m],
        "statuses": list(RUN_STATUSES),
    }


_BUCKETS = (60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400)


@page_api.get("/v1/runlog/series", responses=error_responses(401, 404, 422), tags=["page"])
def runlog_series(
    request: Request, buckets: int = Query(24, ge=1, le=200), limit: int = Query(20000, ge=1, le=100000)
) -> dict[str, Any]:
    """Per model and time bucket: model calls, latency p50/p95 (cache hits left out) and cost.

    The bucket width is the smallest of a minute, 5 and 15 minutes, an hour, 6 hours, a day and a
    week that fits the latest ``limit`` model calls into at most ``buckets`` buckets.
    """
    request.state.input_location = "query"
    runlog = _runlog_or_404()
    rows = runlog.database.query(
        "SELECT model, started_at, duration_ms, cost, cached FROM runs WHERE kind = 'model' "
        "AND started_at IS NOT NULL ORDER BY started_at DESC LIMIT ?",
        (limit,),
    )
    calls = []
    for row in rows:
        try:
            at = datetime.fromisoformat(row["started_at"]).timestamp()
        except (TypeError, ValueError):
            continue
        calls.append((at, row))
    if not calls:
        return {"bucket_seconds": _BUCKETS[0], "models": {}}
    first, last = min(at for at, _ in calls), max(at for at, _ in calls)
    width = next((w for w in _BUCKETS if (last // w) - (first // w) < buckets), _BUCKETS[-1])
    grouped: dict[str, dict[int, dict[str, Any]]] = {}
    for at, row in calls:
        start = int(at // width * width)
        bucket = grouped.setdefault(row["model"] or "?", {}).setdefault(
            start, {"calls": 0, "cost": 0.0, "priced": False, "latencies": []}
        )
        bucket["calls"] += 1
        if row["cost"] is not None:
            bucket["cost"] += float(row["cost"])
            bucket["priced"] = True
        if not row["cached"] and row["duration_ms"] is not None:
            bucket["latencies"].append(float(row["duration_ms"]))
    series: dict[str, list[dict[str, Any]]] = {}
    for model, by_start in sorted(grouped.items()):
        points = []
        for start, bucket in sorted(by_start.items()):
            latencies = sorted(bucket["latencies"])  # nearest-rank percentiles, as `decirank runs stats`
            points.append(
                {
                    "t": datetime.fromtimestamp(start, UTC).isoformat(),
                    "calls": bucket["calls"],
                    "p50_ms": _percentile(latencies, 0.5),
                    "p95_ms": _percentile(latencies, 0.95),
                    "cost": bucket["cost"] if bucket["priced"] else None,
                }
            )
        series[model] = points
    return {"bucket_seconds": width, "models": series}


page_router.include_router(page_api)
