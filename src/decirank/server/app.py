"""The FastAPI application: settings, the guards around every request, and error mapping.

Errors keep their types on the wire. Bad input is a 422 whose ``detail``
names the field (FastAPI's own for a misshapen body, the tools' for a
meaning they refuse, :func:`parse_body`'s for a body that is not strict JSON:
malformed, NaN or Infinity, a lone surrogate); a request over a model's
declared limits is a 413 stating the limit; a decision that could not be had
is a 502, or a 504 when time ran out (saying after how long, and whose limit
that was), with the typed error as ``error``. Bad input never yields a 500,
and nothing escapes as an exception to the HTTP server, which would drop the
connection.

Guards stand in front of every route, one added later included, and the
OpenAPI document lists what they answer on every operation: without the API
key a 401 (under ``/v1/`` and ``/v2/``) before the body is read; a body over
the size limit a 413, one that has not all arrived in time a 408, one framed
by both Content-Length and Transfer-Encoding a 400; then :func:`parse_body`
refuses JSON nested deeper than :data:`~decirank._jsonpath.MAX_NESTING`, so
nothing behind it (the tools, the run log, the response encoder) meets more.

A request whose client goes away is cancelled, so its work (model calls,
``exec:`` commands and their process groups) ends with it.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import sys
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from email.message import Message as MimeHeader
from typing import Any

import anyio
from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from .._jsonpath import first_unfit, too_deep_in_text
from ..decisions.decider import DEFAULT_ROLE, Decider
from ..errors import (
    AllModelsFailedError,
    ConfigError,
    DecirankError,
    DecisionError,
    DecisionTimeoutError,
    InvalidInputError,
    LimitExceededError,
    ModelTimeoutError,
    UnknownModelError,
)

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT",
    "GuardedRoute",
    "SafeJSONResponse",
    "ServerSettings",
    "create_app",
    "needs_api_key",
    "parse_body",
]

logger = logging.getLogger("decirank.server")

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
#: Seconds a client has to send a request's whole body once its headers are in.
DEFAULT_BODY_TIMEOUT = 10.0
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


# --- responses that always render ----------------------------------------------------------


def _clean_text(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot carry) shown as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _sanitized(value: Any) -> Any:
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {_clean_text(str(key)): _sanitized(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_sanitized(item) for item in value]
    return value


class SafeJSONResponse(JSONResponse):
    """Strict JSON as usual; a value JSON or UTF-8 cannot carry is rendered as null or escaped text.

    An error message may quote the input it refuses, and that input may hold
    what made it bad; rendering must never fail on it.
    """

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except (ValueError, UnicodeError):
            return super().render(_sanitized(content))


# --- the body: strict JSON, parsed once ------------------------------------------------------


class BodyError(InvalidInputError):
    """A request body that is not strict JSON, located in the body."""

    def __init__(self, location: list[str | int], expected: str, *, detail: str, kind: str) -> None:
        field = ".".join(str(part) for part in location) or "body"
        super().__init__(field, expected, detail=detail)
        self.location = ["body", *location]
        self.kind = kind

    def to_dict(self) -> dict[str, Any]:
        # On the wire it is the InvalidInputError every client already knows.
        return {**super().to_dict(), "type": "InvalidInputError"}


def _first_unfit(document: Any) -> BodyError | None:
    """The first value (in document order) decirank cannot take: NaN, ±Infinity, a lone surrogate, or
    containers nested deeper than :data:`~decirank._jsonpath.MAX_NESTING`."""
    found = first_unfit(document)
    if found is None:
        return None
    location = [_clean_text(part) if isinstance(part, str) else part for part in found.path]
    return BodyError(location, found.expected, detail=found.problem, kind=found.kind)


def parse_body(body: bytes) -> Any:
    """The JSON document ``body`` holds, refusing with :class:`BodyError` what JSON or UTF-8 cannot carry.

    Python's parser takes ``NaN``, ``Infinity`` and ``1e999`` as floats and
    ``"\\ud800"`` as a lone surrogate; none of them can be answered, logged
    or sent on, so they are refused here, once, for every endpoint.
    """
    try:
        document = json.loads(body)
    except json.JSONDecodeError as error:
        raise BodyError(
            [],
            "a JSON document",
            detail=f"not JSON: {error.msg} at line {error.lineno} column {error.colno}",
            kind="json_invalid",
        ) from None
    except UnicodeDecodeError as error:
        raise BodyError(
            [],
            "a JSON document in UTF-8",
            detail=f"not UTF-8: {error.reason} at byte {error.start}",
            kind="json_invalid",
        ) from None
    except RecursionError:
        # Too deep for the parser: where it went too deep is read from the text instead.
        deep = too_deep_in_text(body.decode("utf-8", "replace"))
        if deep is None:
            raise BodyError([], "a JSON document", detail="nested too deeply", kind="json_invalid") from None
        location = [_clean_text(part) if isinstance(part, str) else part for part in deep.path]
        raise BodyError(location, deep.expected, detail=deep.problem, kind=deep.kind) from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        detail = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise BodyError([], "a JSON document", detail=detail, kind="json_invalid") from None
    unfit = _first_unfit(document)
    if unfit is not None:
        raise unfit
    return document


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this content type as JSON (:class:`GuardedRoute` makes it so when
    none is given)."""
    if not content_type:
        return True
    header = MimeHeader()
    header["content-type"] = content_type
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


class _ParsedRequest(Request):
    """A request whose JSON body :func:`parse_body` has already checked and parsed."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_body(await self.body())
        return self._json


class GuardedRoute(APIRoute):
    """A route whose JSON body is parsed strictly before FastAPI reads it, so a bad one is a 422 naming it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        takes_body = self.body_field is not None

        async def guarded(request: Request) -> Response:
            scope = request.scope
            if takes_body and not request.headers.get("content-type"):
                # A body without a content type is read as JSON, which is all these routes take.
                headers = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
                scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
            parsed = _ParsedRequest(scope, request.receive)
            # A route without a body ignores one sent anyway (a GET with a body), as FastAPI does.
            if takes_body and _is_json(parsed.headers.get("content-type")) and await parsed.body():
                await parsed.json()  # a BodyError here goes to the error handlers, as any DecirankError
            return await handler(parsed)

        return guarded


# --- the guards around every request ---------------------------------------------------------


class _HTTPMiddleware:
    """An ASGI middleware whose :meth:`handle` sees every HTTP request; anything else (lifespan) passes by."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.handle(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


def _refusal(status: int, kind: str, message: str, *, close: bool = False) -> JSONResponse:
    """A refusal of the request as sent (its size, framing or pace), before anything reads it.

    With ``close`` the connection ends after it: what else the client sends on it cannot be trusted
    to be the next request.
    """
    headers = {"connection": "close"} if close else None
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status, headers=headers)


class BodyLimit(_HTTPMiddleware):
    """Reads the body whole, within limits: 413 over ``max_bytes`` (declared or, when chunked, as it
    arrives), 408 when it has not all arrived within ``timeout`` seconds, 400 when both its length and
    ``Transfer-Encoding: chunked`` are declared (a request two servers may split differently).

    The body is read here in full, then handed on: the endpoints parse it
    whole anyway, and reading it first means nothing else runs on a body that
    will be refused. From then on this layer listens for the client going
    away, and cancels the request's work when it does.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout: float = DEFAULT_BODY_TIMEOUT) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared and b"transfer-encoding" in headers:
            message = "the request declares both Content-Length and Transfer-Encoding: send one of them"
            await _refusal(400, "BadRequestError", message, close=True)(scope, receive, send)
            return
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        body = bytearray()
        with anyio.move_on_after(self.timeout) as clock:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                if len(body) > self.max_bytes:
                    await self._too_large(scope, receive, send)
                    return
                if not message.get("more_body", False):
                    break
        if clock.cancelled_caught:
            message = f"the request body did not arrive within {self.timeout:g} s"
            await _refusal(408, "RequestTimeoutError", message)(scope, receive, send)
            return
        await _cancelled_on_disconnect(self.app, scope, bytes(body), receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"the request body is over {self.max_bytes} bytes"
        await _refusal(413, "TooLargeError", message)(scope, receive, send)


_KEY_REQUIRED = "a valid API key is required: Authorization: Bearer <key>"


def _key_missing(expected: str | None, authorization: str) -> bool:
    if expected is None:
        return False
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), expected.encode())


def needs_api_key(request: Request) -> None:
    """The dependency of every route that wants the server's API key (when it has one).

    :class:`ApiKeyFirst` refuses a request without it before the body is read; this checks again
    where the route runs, so a route is never open for want of the middleware.
    """
    if _key_missing(settings_of(request).api_key, request.headers.get("authorization", "")):
        raise HTTPException(status_code=401, detail=_KEY_REQUIRED, headers={"WWW-Authenticate": "Bearer"})


#: The paths the API key guards: the API's, whatever the route (one added later, or none: a 404).
KEYED_PREFIXES = ("/v1/", "/v2/")


def wants_key(path: str) -> bool:
    return path.startswith(KEYED_PREFIXES)


class ApiKeyFirst(_HTTPMiddleware):
    """Answers 401 to a request under :data:`KEYED_PREFIXES` without the server's API key, before
    its body is read or parsed; the routes' :func:`needs_api_key` checks it again where they run."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        expected = scope["app"].state.settings.api_key
        authorization = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if wants_key(scope["path"]) and _key_missing(expected, authorization):
            response = JSONResponse({"detail": _KEY_REQUIRED}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _cancelled_on_disconnect(app: ASGIApp, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
    """Run ``app`` on the read ``body``, cancelling it if the client disconnects before the response is sent.

    HTTP servers do not cancel a request whose client left; without this, a
    request would keep its model calls and commands running for nobody.
    """
    disconnected = anyio.Event()
    answered = False
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def sending(message: Message) -> None:
        nonlocal answered
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            answered = True
        await send(message)

    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()
            if not answered:
                group.cancel_scope.cancel()

        group.start_soon(watch)
        await app(scope, replay, sending)
        group.cancel_scope.cancel()


class ServerErrors(_HTTPMiddleware):
    """The last resort: an exception that escaped every handler becomes a logged 500, never a dropped connection."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            logger.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            body = {"error": {"type": "InternalError", "message": f"internal error: {type(error).__name__}"}}
            await SafeJSONResponse(body, status_code=500)(scope, receive, send)


class RequestId(_HTTPMiddleware):
    """Gives every response an ``x-request-id``, which clients keep on the errors they raise."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = uuid.uuid4().hex.encode()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id)]}
            await send(message)

        await self.app(scope, receive, send_with_id)


# --- errors to statuses ----------------------------------------------------------------------


def location_of(field: str, where: str = "body") -> list[str | int]:
    # Only ASCII digits are a position: "³".isdigit() is true, and int() refuses it.
    return [where, *(int(part) if part.isascii() and part.isdigit() else part for part in field.split("."))]


def _over_limits(error: DecirankError) -> bool:
    """Whether no model could take the request because it is over their declared limits (never sent)."""
    if isinstance(error, LimitExceededError):
        return True
    if isinstance(error, AllModelsFailedError) and error.attempts:
        return all(isinstance(getattr(attempt, "error", None), LimitExceededError) for attempt in error.attempts)
    return False


@dataclass(frozen=True)
class RequestBudget:
    """A request's time budget as the server gave it, and what it was for; the 504 says both."""

    seconds: float
    #: Whose limit it is: the request's ``timeout`` or the server's ``--timeout``.
    source: str
    #: The size of the work, e.g. "10000 documents".
    work: str | None = None


def _timeout_body(error: DecisionTimeoutError, budget: RequestBudget | None) -> dict[str, Any]:
    seconds = budget.seconds if budget is not None else error.timeout
    what = f"{error.what} on {budget.work}" if budget is not None and budget.work else error.what
    message = f"{what} timed out after {seconds:g} s"
    if budget is not None:
        message += f" ({budget.source})"
    if error.finished is not None and error.asked is not None:
        message += f"; {error.finished} of {error.asked} model calls finished"
    else:
        message += "; its work was stopped and nothing of it is returned"
    body = {**error.to_dict(), "message": message, "timeout": seconds}
    if budget is not None:
        body["limit"] = budget.source
    return body


def error_response(error: DecirankError, request: Request | None = None) -> JSONResponse:
    if isinstance(error, InvalidInputError | UnknownModelError):
        field = error.field if isinstance(error, InvalidInputError) else "model"
        where = getattr(request.state, "input_location", "body") if request is not None else "body"
        location = getattr(error, "location", None) or location_of(field, where)
        kind = getattr(error, "kind", "invalid_input")
        detail = [{"loc": location, "msg": str(error), "type": kind}]
        return SafeJSONResponse({"detail": detail, "error": error.to_dict()}, status_code=422)
    if _over_limits(error):
        # A limit of the serving model's, not a failure: the client must send less.
        return SafeJSONResponse({"error": error.to_dict()}, status_code=413)
    if isinstance(error, DecisionTimeoutError):
        budget = getattr(request.state, "budget", None) if request is not None else None
        return SafeJSONResponse({"error": _timeout_body(error, budget)}, status_code=504)
    if isinstance(error, ModelTimeoutError):
        status = 504
    elif isinstance(error, DecisionError):
        status = 502
    elif isinstance(error, ConfigError):
        # The server's own configuration cannot answer (a missing key or model package).
        status = 503
    else:
        status = 500
    return SafeJSONResponse({"error": error.to_dict()}, status_code=status)


def _refusal_schema(description: str) -> dict[str, Any]:
    error = {
        "type": "object",
        "required": ["type", "message"],
        "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
    }
    body = {"type": "object", "required": ["error"], "properties": {"error": error}}
    return {"description": description, "content": {"application/json": {"schema": body}}}


#: What the guards around every request may answer, whatever the route.
_GUARD_RESPONSES = {
    "400": _refusal_schema("The request declares both Content-Length and Transfer-Encoding."),
    "408": _refusal_schema("The request body did not all arrive in time."),
    "413": _refusal_schema("The request body is over the server's size limit."),
}
_KEY_RESPONSE = {
    "description": "An API key is required and was missing or wrong.",
    "content": {
        "application/json": {
            "schema": {"type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}}}
        }
    },
}


def _document_guards(application: FastAPI) -> None:
    """List in the OpenAPI document, on every operation, the statuses the guards answer with.

    The guards stand in front of every route, a route added later included; so does this.
    """
    generate = application.openapi

    def openapi() -> dict[str, Any]:
        document = generate()  # FastAPI's own, made again only when the routes change
        for path, operations in document.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, entry in _GUARD_RESPONSES.items():
                    responses.setdefault(status, entry)
                if wants_key(path):
                    responses.setdefault("401", _KEY_RESPONSE)
        return document

    application.openapi = openapi  # type: ignore[method-assign]


def create_app(
    model: str = DEFAULT_ROLE,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    allow_exec: bool = False,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> FastAPI:
    """The ``decirank serve`` application, answering with ``model`` unless a request names another.

    ``max_body_bytes`` and ``body_timeout`` bound a request's body: its size, and the seconds it may
    take to arrive once the headers have.

    ``model`` is resolved here, so a server that could not answer fails at start, not on its first request.
    """
    from .routes import router

    Decider.resolve(model)
    application = FastAPI(
        default_response_class=SafeJSONResponse,
        # Swagger UI and ReDoc load their scripts from a CDN; the page at / is this server's own
        # playground, and /openapi.json describes every endpoint for any viewer or client generator.
        docs_url=None,
        redoc_url=None,
        title="decirank",
        version=__version__,
        description="Rank, rerank, filter and decide with decision models: the decirank tools over HTTP, "
        "a Cohere-compatible /v1/rerank, and the server's models in the System One and OpenAI Decisions formats.",
    )
    application.state.settings = ServerSettings(model, api_key, max_body_bytes, timeout, allow_exec)
    application.include_router(router)
    from .page import page_router  # the page at / and the read-only endpoints it needs

    application.include_router(page_router)

    @application.exception_handler(DecirankError)
    async def decirank_error(request: Request, error: DecirankError) -> JSONResponse:
        return error_response(error, request)

    @application.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which may be what JSON cannot render.
        return SafeJSONResponse({"detail": jsonable_encoder(error.errors())}, status_code=422)

    # A path with a slash too many is a 404, not a redirect to a path that may not be the client's.
    application.router.redirect_slashes = False
    _document_guards(application)

    application.add_middleware(ServerErrors)
    application.add_middleware(BodyLimit, max_bytes=max_body_bytes, timeout=body_timeout)
    application.add_middleware(ApiKeyFirst)
    application.add_middleware(RequestId)
    return application


def settings_of(request: Request) -> ServerSettings:
    settings: Any = request.app.state.settings
    return settings
