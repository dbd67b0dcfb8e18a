"""The FastAPI application: settings, the guards around every request, and error mapping.

Errors keep their types on the wire. Bad input is a 422 whose ``detail``
names the field (FastAPI's own for a misshapen body, the tools' for a
meaning they refuse); a decision that could not be had is a 502, or a 504
when time ran out, with the typed error as ``error``; a request over the size
limit is a 413 before anything reads it. Bad input never yields a 500.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..decisions.decider import DEFAULT_ROLE, Decider
from ..errors import (
    ConfigError,
    DecirankError,
    DecisionError,
    DecisionTimeoutError,
    InvalidInputError,
    ModelTimeoutError,
    UnknownModelError,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_TIMEOUT", "ServerSettings", "create_app"]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
#: Seconds a request may take when it names no budget of its own.
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServerSettings:
    #: The model that answers requests naming none: a role or a provider:model name.
    model: str = DEFAULT_ROLE
    #: When set, every /v1 endpoint wants ``Authorization: Bearer <api_key>``.
    api_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    timeout: float = DEFAULT_TIMEOUT
    #: Whether score_list may run ``exec:`` evaluators: a client's shell commands on this host.
    allow_exec: bool = False


class BodyLimit:
    """Answers 413 to a body over ``max_bytes``, declared or (when chunked) as it arrives.

    The body is read here in full, then handed on: the endpoints parse it
    whole anyway, and reading it first means nothing else runs on a body that
    will be refused.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {"error": {"type": "TooLargeError", "message": f"the request body is over {self.max_bytes} bytes"}},
            status_code=413,
        )
        await response(scope, receive, send)


class RequestId:
    """Gives every response an ``x-request-id``, which clients keep on the errors they raise."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex.encode()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id)]}
            await send(message)

        await self.app(scope, receive, send_with_id)


def _location(field: str) -> list[str | int]:
    return ["body", *(int(part) if part.isdigit() else part for part in field.split("."))]


def error_response(error: DecirankError) -> JSONResponse:
    if isinstance(error, InvalidInputError | UnknownModelError):
        field = error.field if isinstance(error, InvalidInputError) else "model"
        detail = [{"loc": _location(field), "msg": str(error), "type": "invalid_input"}]
        return JSONResponse({"detail": detail, "error": error.to_dict()}, status_code=422)
    if isinstance(error, DecisionTimeoutError | ModelTimeoutError):
        status = 504
    elif isinstance(error, DecisionError):
        status = 502
    elif isinstance(error, ConfigError):
        # The server's own configuration cannot answer (a missing key or model package).
        status = 503
    else:
        status = 500
    return JSONResponse({"error": error.to_dict()}, status_code=status)


def create_app(
    model: str = DEFAULT_ROLE,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    allow_exec: bool = False,
) -> FastAPI:
    """The ``decirank serve`` application, answering with ``model`` unless a request names another.

    ``model`` is resolved here, so a server that could not answer fails at start, not on its first request.
    """
    from .routes import router

    Decider.resolve(model)
    application = FastAPI(
        title="decirank",
        version=__version__,
        description="Rank, rerank, filter and decide with decision models: the decirank tools over HTTP, "
        "a Cohere-compatible /v1/rerank, and the server's models in the System One and OpenAI Decisions formats.",
    )
    application.state.settings = ServerSettings(model, api_key, max_body_bytes, timeout, allow_exec)
    application.include_router(router)

    @application.exception_handler(DecirankError)
    async def decirank_error(_request: Request, error: DecirankError) -> JSONResponse:
        return error_response(error)

    application.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    application.add_middleware(RequestId)
    return application


def settings_of(request: Request) -> ServerSettings:
    settings: Any = request.app.state.settings
    return settings
