"""``decirank mcp``: serve the tools to agents over MCP (stdio or streamable HTTP)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ..mcp import DEFAULT_HOST, DEFAULT_PORT, HTTP_PATH, serve
from ._app import app
from ._output import check_host, error_console


class McpTransport(str, Enum):
    stdio = "stdio"
    http = "http"


@app.command()
def mcp(
    transport: Annotated[
        McpTransport,
        typer.Option("--transport", "-t", help="stdio for an agent that spawns the server; http to listen."),
    ] = McpTransport.stdio,
    host: Annotated[
        str, typer.Option("--host", callback=check_host, help="Address to listen on (http).")
    ] = DEFAULT_HOST,
    port: Annotated[
        int, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on (http).")
    ] = DEFAULT_PORT,
    allow_exec: Annotated[
        bool,
        typer.Option("--allow-exec", help="Let score_list run exec: evaluators, i.e. shell commands of the caller's."),
    ] = False,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="DECIRANK_MCP_API_KEY",
            help="Over http, require Authorization: Bearer KEY on every request (as decirank serve --api-key).",
        ),
    ] = None,
) -> None:
    """Serve the tools to agents over MCP.

    builtin__rank, builtin__rerank, builtin__filter, builtin__classify, builtin__score, builtin__calibrate and
    builtin__score_list, with their schemas.
    """
    from ..tools._evaluators.exec import adopt_orphans

    adopt_orphans()  # the MCP server starts no children but its commands': their orphans are its to end
    if transport is McpTransport.http:
        # stdout stays quiet on stdio, where it carries the protocol; over http the address helps.
        error_console.print(f"decirank MCP server at http://{host}:{port}{HTTP_PATH}")
    serve(transport.value, host=host, port=port, allow_exec=allow_exec, api_key=api_key)
