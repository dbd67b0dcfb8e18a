"""What a load balancer and a scraper ask of the server: ``/readyz`` and ``/metrics``, and the start-up they wait for.

``/healthz`` (in ``routes``) is liveness: the process answers. ``/readyz`` is
readiness: 200 only once the server's models are loaded and while the run
log takes writes, 503 otherwise, so a balancer sends nothing to a replica
that would fail or stall it. Start-up (the ASGI lifespan) loads the models
and opens the run log before the server accepts a connection; stopping
waits until every run written is committed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import anyio
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response

from ..decisions.decider import Decider
from ..errors import DecirankError
from ..stores.runlog import current_runlog
from . import wire
from ._deps import SafeJSONResponse, key_missing, needs_api_key, requests_settled, settings_of
from .metrics import CONTENT_TYPE, mark_worker_gone

__all__ = ["probes_router", "serving_lifespan"]

#: Seconds stopping waits for cancelled requests to record their runs: they only have to unwind.
CANCELLED_UNWIND_SECONDS = 10.0


def _load_models(application: FastAPI) -> None:
    """Load every model of the server's role that loads ahead (the embedded one), and open the run log."""
    decider = Decider.resolve(application.state.settings.model)
    for backend in decider.chain:
        load = getattr(backend, "load", None)
        if callable(load):
            load()
    current_runlog()  # opening it runs its migrations and closes the runs of writers that died
    application.state.model_loaded = True


@contextlib.asynccontextmanager
async def serving_lifespan(application: FastAPI) -> AsyncIterator[None]:
    """Start-up loads the models and opens the run log; stopping lets cancelled requests record their runs."""
    await anyio.to_thread.run_sync(_load_models, application)
    try:
        yield
    finally:
        # Requests cancelled at shutdown unwind now, recording their runs cancelled, before the log is flushed.
        await requests_settled(application.state, CANCELLED_UNWIND_SECONDS)
        runlog = current_runlog()
        if runlog is not None:
            await anyio.to_thread.run_sync(runlog.flush)
        mark_worker_gone(os.getpid())


def _runlog_state() -> str:
    """``writable``, ``off``, or why a run could not be written now."""
    try:
        runlog = current_runlog()
        if runlog is None:
            return "off"
        runlog.check_writable()
    except DecirankError as error:
        return f"not writable: {error}"
    return "writable"


probes_router = APIRouter()


@probes_router.get(
    "/readyz",
    response_model=wire.Readiness,
    responses={503: {"model": wire.Readiness, "description": "Not ready: the body says which check failed."}},
    tags=["server"],
)
async def readyz(request: Request) -> Response:
    """Readiness: 200 once the models are loaded and while the run log takes writes, else 503.

    Open to every caller, as a load balancer asks without a key; the answering worker's ``pid`` only to a
    request carrying the server's API key (never when it has none), as it helps whoever aims at the process.
    """
    settings = settings_of(request)
    loaded = bool(request.app.state.model_loaded)
    runlog = await anyio.to_thread.run_sync(_runlog_state)
    ready = loaded and runlog in ("writable", "off")
    body: dict[str, object] = {
        "status": "ready" if ready else "not ready",
        "model": settings.model,
        "model_loaded": loaded,
        "runlog": runlog,
    }
    if settings.api_key is not None and not key_missing(settings.api_key, request.headers.get("authorization", "")):
        body["pid"] = os.getpid()
    return SafeJSONResponse(body, status_code=200 if ready else 503)


def _metrics_access(request: Request) -> None:
    if not settings_of(request).metrics_public:
        needs_api_key(request)


@probes_router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}, "description": "Prometheus text format."},
        401: {"model": wire.HTTPErrorBody, "description": "An API key is required and was missing or wrong."},
    },
    dependencies=[Depends(_metrics_access)],
    tags=["server"],
)
async def metrics(request: Request) -> Response:
    """The server's figures in the Prometheus text format; every worker's, added up, under ``--workers``."""
    text = await anyio.to_thread.run_sync(request.app.state.metrics.render)
    return Response(text, media_type=CONTENT_TYPE)
