"""``decirank serve``: the HTTP server, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import ipaddress
import math
import os
from enum import Enum
from typing import Annotated

import typer

from ..batching.engines import usable_cores
from ..decisions.decider import Decider
from ..errors import MissingAssetError
from ..tools._checks import MAX_ITEMS
from ..tools.rerank import PER_DOCUMENT_TIMEOUT
from ._app import app
from ._output import check_host, error_console


class RunlogTexts(str, Enum):
    """What the run log keeps of the texts of requests."""

    full = "full"
    hashes = "hashes"


class LogLevel(str, Enum):
    """uvicorn's log levels."""

    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    debug = "debug"
    trace = "trace"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: The server's default budget (server/_deps.py's DEFAULT_TIMEOUT), kept here so --help needs no fastapi.
DEFAULT_TIMEOUT = 30.0


def _positive_seconds(value: float | None) -> float | None:
    """``--timeout`` and ``--shutdown-timeout``: a finite number of seconds above 0 (click lets ``nan`` through)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value} is not a number of seconds greater than 0")
    return value


@app.command()
def serve(
    host: Annotated[
        str,
        typer.Option(
            "--host", callback=check_host, help="Address to bind; other machines reach only a non-loopback one."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on.")] = 8000,
    model: Annotated[
        str, typer.Option("--model", "-m", help="The role or provider:model that answers requests naming none.")
    ] = "decider",
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="DECIRANK_SERVER_API_KEY",
            help="Require Authorization: Bearer KEY on every /v1 and /v2 endpoint and on /rerank.",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int | None, typer.Option("--max-body-bytes", min=1, help="Larger request bodies get 413 (default 4 MiB).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            callback=_positive_seconds,
            help=f"Seconds a request may take when it names no budget (default {DEFAULT_TIMEOUT:g}); a rerank "
            f"gets this plus {PER_DOCUMENT_TIMEOUT * 1000:g} ms per document.",
        ),
    ] = None,
    allow_exec: Annotated[
        bool,
        typer.Option("--allow-exec", help="Let /v1/score_list run exec: evaluators, i.e. clients' shell commands."),
    ] = False,
    workers: Annotated[
        int,
        typer.Option("--workers", "-w", min=0, help="Worker processes on the one port; 0 is one per core."),
    ] = 1,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads",
            min=1,
            help="Cores, and so encoder threads, per worker, each worker pinned to its own "
            "(default: an even share; a single worker uses every core).",
        ),
    ] = None,
    max_concurrency: Annotated[
        int | None,
        typer.Option(
            "--max-concurrency",
            min=1,
            help="Requests a worker answers at once; past it, 503 with Retry-After at once (default 256; "
            "the probes are never refused).",
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin",
            help="On a loopback address, also answer pages of this origin (scheme://host[:port]; repeatable). "
            "Others get 403, and a Host that is not loopback 421.",
        ),
    ] = None,
    metrics_public: Annotated[
        bool, typer.Option("--metrics-public", help="Serve /metrics without the --api-key.")
    ] = False,
    shutdown_timeout: Annotated[
        float,
        typer.Option(
            "--shutdown-timeout",
            callback=_positive_seconds,
            help="Seconds requests in flight may take to finish after SIGTERM before they are cancelled.",
        ),
    ] = 30.0,
    runlog_texts: Annotated[
        RunlogTexts | None,
        typer.Option(
            "--runlog-texts",
            envvar="DECIRANK_RUNLOG_TEXTS",
            help="What the run log keeps of requests' texts: full, or hashes (each text's SHA-256 and length "
            "only). Default: [runlog] texts in the config, else full.",
        ),
    ] = None,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="uvicorn's log level.")] = LogLevel.warning,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="No access log: by default each request is a line on stderr (method, path, status, ms, run id; "
            "never the body or the query string).",
        ),
    ] = False,
) -> None:
    """Serve the tools and the model over HTTP.

    The tools at /v1/rank, /v1/filter, /v1/classify, /v1/score and /v1/score_list; rerank at /v1/rerank (Cohere's
    v1 and Jina's shape), /v2/rerank (Cohere's v2) and /rerank (text-embeddings-inference's and Infinity's); the
    model at /v1/systemone and /v1/decisions; the run log at /v1/runs; their OpenAPI document at /openapi.json;
    probes at /healthz (alive) and /readyz (model loaded, run log writable); Prometheus metrics at /metrics; a page
    to try them at /.

    A call takes at most {max_items} items, documents or texts; more is a 422 naming the field and the limit.
    """
    try:
        from ..server.workers import PortInUseError, ServeOptions, listen
        from ..server.workers import serve as run_server
    except ImportError as error:
        raise MissingAssetError(
            "the HTTP server (fastapi, uvicorn, prometheus-client)", "pip install 'decirank[server]'"
        ) from error
    cores = usable_cores()
    if threads is not None and threads > len(cores):
        raise typer.BadParameter(
            f"{threads} is more than the {len(cores)} cores this process may use", param_hint="--threads"
        )
    if runlog_texts is not None:
        # Through the environment, which every worker inherits and the run log reads on each call.
        os.environ["DECIRANK_RUNLOG_TEXTS"] = runlog_texts.value
    # Resolved here, so a model that cannot answer fails now, not in every worker.
    Decider.resolve(model)
    options = ServeOptions(
        model=model,
        host=host,
        port=port,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        timeout=timeout,
        allow_exec=allow_exec,
        max_concurrency=max_concurrency,
        metrics_public=metrics_public,
        allowed_origins=tuple(allow_origin or ()),
        workers=workers,
        threads=threads,
        shutdown_timeout=shutdown_timeout,
        log_level=log_level.value,
        cores=tuple(cores),
        access_log=not quiet,
    ).resolved()
    if not _is_loopback(host) and api_key is None:
        error_console.print(f"warning: serving on {host} without --api-key: anyone who can reach it may use it")
    try:
        # Bound before the banner: a taken port is one line and exit 2, not a banner then uvicorn's error.
        sock = listen(host, port)
    except PortInUseError as error:
        raise typer.BadParameter(error.strerror, param_hint="--port") from None
    workers_text = f"{options.workers} workers" if options.workers > 1 else "1 worker"
    if options.threads is None:
        cores_text = f"every core ({len(cores)})"
    else:
        cores_text = f"{options.threads} core{'s' if options.threads > 1 else ''}"
        cores_text += " each" if options.workers > 1 else ""
    error_console.print(f"decirank serve: http://{host}:{port} (model {model}, {workers_text} on {cores_text})")
    run_server(options, sock)


# The limit is stated from the constant, so --help says what the server does.
serve.__doc__ = (serve.__doc__ or "").replace("{max_items}", f"{MAX_ITEMS:,}")
