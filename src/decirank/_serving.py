"""Running an ASGI app with uvicorn under decirank's limits: ``decirank serve`` and ``decirank mcp -t http``.

- **Connections**: at most :data:`MAX_CONNECTIONS` at once; uvicorn answers
  503 to a request beyond them rather than let a flood of slow clients take
  every file descriptor.
- **Idle connections** are closed after :data:`KEEP_ALIVE_SECONDS`.
- **Shutdown** (SIGTERM, Ctrl-C) first stops the ``exec:`` commands still
  running (their refs come back UNKNOWN, not judged), so a request waiting
  on one ends at once instead of holding the server for the command's whole
  budget; then uvicorn lets the other requests finish, for at most
  :data:`SHUTDOWN_GRACE_SECONDS`, and cancels what is left.

The body of a request (read whole, with a time limit, before anything parses
it) is the HTTP server's own guard: see :class:`decirank.server.app.BodyLimit`.
"""

from __future__ import annotations

import socket
from typing import Any

import uvicorn

from .tools._evaluators.exec import stop_running_commands

__all__ = [
    "KEEP_ALIVE_SECONDS",
    "MAX_CONNECTIONS",
    "SHUTDOWN_GRACE_SECONDS",
    "Server",
    "server",
    "stop_commands_on_shutdown",
]

MAX_CONNECTIONS = 256
KEEP_ALIVE_SECONDS = 5
SHUTDOWN_GRACE_SECONDS = 10


class Server(uvicorn.Server):
    """uvicorn's server, stopping running ``exec:`` commands as soon as it starts to shut down."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stop_running_commands()
        await super().shutdown(sockets=sockets)


def stop_commands_on_shutdown() -> None:
    """Make every uvicorn server of this process stop running ``exec:`` commands as it starts to shut down.

    For the workers of uvicorn's own supervisor, which build a plain ``uvicorn.Server`` in each worker
    process before decirank's code runs there: called from the worker's application factory.
    """
    if getattr(uvicorn.Server.shutdown, "stops_commands", False):
        return
    original = uvicorn.Server.shutdown

    async def shutdown(self: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        stop_running_commands()
        await original(self, sockets=sockets)

    shutdown.stops_commands = True  # type: ignore[attr-defined]
    uvicorn.Server.shutdown = shutdown  # type: ignore[method-assign]


def server(app: Any, *, host: str, port: int, log_level: str = "warning") -> Server:
    """A :class:`Server` for ``app`` on ``host:port`` with the limits above."""
    return Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )
    )
