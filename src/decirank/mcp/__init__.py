"""The MCP server: decirank's tools for agents, over stdio or streamable HTTP.

    decirank mcp                                  # stdio, for an agent that spawns it
    decirank mcp --transport http --port 8765     # streamable HTTP at http://127.0.0.1:8765/mcp

It serves the tools of :mod:`decirank.tools.registry` (``builtin__rank``,
``builtin__rerank``, ``builtin__filter``, ``builtin__classify``, ``builtin__score``,
``builtin__calibrate`` and ``builtin__score_list``) with
their input and output schemas. A tool's typed error comes back as an error
result carrying its message, never as a crash.

The official ``mcp`` SDK is an optional dependency (``pip install
'decirank[mcp]'``); it is imported only when a server is built, so the rest
of decirank works without it.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from ..errors import InvalidInputError, MissingAssetError
from ._transport import DEFAULT_HOST, DEFAULT_PORT, HTTP_PATH, Transport

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "HTTP_PATH", "build_server", "serve"]


def _require_sdk() -> None:
    if importlib.util.find_spec("mcp") is None:
        raise MissingAssetError("the MCP SDK (package mcp)", "pip install 'decirank[mcp]'")


def build_server(*, allow_exec: bool = False) -> Server:
    """A low-level MCP ``Server`` serving decirank's tools, ready for any transport.

    score_list's ``exec:`` evaluators run the caller's shell commands, so they
    are refused unless ``allow_exec`` is set.
    """
    _require_sdk()
    from .server import build_server as build

    return build(allow_exec=allow_exec)


def serve(
    transport: Transport = "stdio",
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_exec: bool = False,
    api_key: str | None = None,
) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (http).

    Over http, ``api_key`` makes every request want ``Authorization: Bearer <api_key>`` (401 otherwise).
    """
    if transport not in ("stdio", "http"):
        raise InvalidInputError("transport", "stdio or http", got=transport)
    _require_sdk()
    from .server import serve as run

    run(transport, host=host, port=port, allow_exec=allow_exec, api_key=api_key)
