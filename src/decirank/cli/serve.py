"""``decirank serve``: the HTTP server, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import ipaddress
import math
from enum import Enum
from typing import Annotated

import typer

from ..errors import MissingAssetError
from ._app import app
from ._output import check_host, error_console


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


def _positive_seconds(value: float | None) -> float | None:
    """The ``--timeout`` callback: a finite number of seconds above 0 (click lets ``nan`` through)."""
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
            help="Require Authorization: Bearer KEY on every /v1 endpoint.",
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
            help="Seconds a request may take when it names no budget (default 30).",
        ),
    ] = None,
    allow_exec: Annotated[
        bool,
        typer.Option("--allow-exec", help="Let /v1/score_list run exec: evaluators, i.e. clients' shell commands."),
    ] = False,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="uvicorn's log level.")] = LogLevel.warning,
) -> None:
    """Serve the tools and the model over HTTP.

    The tools at /v1/rank, /v1/rerank (Cohere's shape), /v1/filter and /v1/score_list; the model at
    /v1/systemone and /v1/decisions; the run log at /v1/runs; a page to try them at /, their OpenAPI
    document at /openapi.json.
    """
    try:
        from .._serving import server
        from ..server import create_app
    except ImportError as error:
        raise MissingAssetError("the HTTP server (fastapi, uvicorn)", "pip install 'decirank[server]'") from error
    # Limits not given here are the server's own defaults, kept in one place.
    limits = {
        name: value for name, value in (("max_body_bytes", max_body_bytes), ("timeout", timeout)) if value is not None
    }
    application = create_app(model, api_key=api_key, allow_exec=allow_exec, **limits)
    if not _is_loopback(host) and api_key is None:
        error_console.print(f"warning: serving on {host} without --api-key: anyone who can reach it may use it")
    error_console.print(f"decirank serve: http://{host}:{port} (model {model}, OpenAPI at /openapi.json)")
    server(application, host=host, port=port, log_level=log_level.value).run()
