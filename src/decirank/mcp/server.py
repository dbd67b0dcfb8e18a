"""The MCP server itself, on the SDK's low-level ``Server``.

The low-level server is used rather than ``MCPServer`` because the schemas
are declared data (the tools' documented field names and descriptions), not
inferred from Python signatures, and the registry already checks arguments.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .._version import __version__
from ..errors import DecirankError
from ..tools.registry import ToolSpec, call_tool, get_tool, tool_specs
from ._transport import DEFAULT_HOST, DEFAULT_PORT, HTTP_PATH, Transport

__all__ = ["build_server", "error_result", "serve"]

INSTRUCTIONS = (
    "decirank ranks, reranks, filters and scores lists with decision models: typed questions answered "
    "with probabilities in one forward pass, no LLM. builtin__rank orders a list against a question in one "
    "call; builtin__rerank scores documents against a query; builtin__filter keeps items a yes/no question "
    "holds for; builtin__classify picks an option per text; builtin__score gives each text the probability "
    "that a yes/no question is true of it; builtin__calibrate fits and stores a calibration from labelled rows, "
    "which filter, score, rerank and classify then take as calibration (filter's target_recall and "
    "target_precision, classify's coverage); builtin__score_list ranks stored artifacts by ref with an evaluator. "
    "The model argument "
    "names a role (decider, the default) or a provider:model such as lexical."
)


def mcp_tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            # Nothing is ever deleted: score_list only adds stamps to refs; calibrate replaces a
            # calibration of the same name.
            destructive_hint=spec.destructive,
        ),
    )


def error_result(error: DecirankError) -> types.CallToolResult:
    """The tool's typed error, as an error result the agent can read and act on."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{type(error).__name__}: {error}")],
        is_error=True,
    )


def success_result(output: dict[str, Any]) -> types.CallToolResult:
    # The text copy serves clients that predate structured content.
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(output, ensure_ascii=False))],
        structured_content=output,
    )


async def _list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[mcp_tool(spec) for spec in tool_specs()])


def _tool_caller(allow_exec: bool):
    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            output = await call_tool(params.name, params.arguments or {}, name_field="name", allow_exec=allow_exec)
        except DecirankError as error:
            return error_result(error)
        return success_result(output)

    return call


def _input_schema(name: str) -> dict[str, Any] | None:
    try:
        return get_tool(name).input_schema
    except DecirankError:
        return None


def build_server(*, allow_exec: bool = False) -> Server:
    """The MCP server; score_list's ``exec:`` evaluators (shell commands) only with ``allow_exec``."""
    return Server(
        "decirank",
        version=__version__,
        title="decirank",
        description="Rank, rerank, filter and score lists with decision models.",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=_input_schema,
        on_list_tools=_list_tools,
        on_call_tool=_tool_caller(allow_exec),
    )


async def _serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


#: What a request without the server's key is told, as ``decirank serve`` tells it.
KEY_REQUIRED = "a valid API key is required: Authorization: Bearer <key>"


class RequireKey:
    """An ASGI wrapper answering 401 to any HTTP request without ``Authorization: Bearer <key>``.

    The key is compared in constant time, as ``decirank serve`` compares it.
    """

    def __init__(self, app: Any, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            authorization = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), self.key):
                body = json.dumps({"detail": KEY_REQUIRED}).encode()
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def _serve_http(server: Server, host: str, port: int, api_key: str | None) -> None:
    from .._serving import server as http_server  # uvicorn is a dependency of the mcp SDK; only HTTP needs it

    # host= turns on the SDK's DNS-rebinding protection for a loopback host (421 / 403).
    app: Any = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    if api_key is not None:
        app = RequireKey(app, api_key)
    await http_server(app, host=host, port=port).serve()


def serve(
    transport: Transport = "stdio",
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_exec: bool = False,
    api_key: str | None = None,
) -> None:
    server = build_server(allow_exec=allow_exec)
    if transport == "stdio":
        anyio.run(_serve_stdio, server)
    else:
        anyio.run(_serve_http, server, host, port, api_key)
