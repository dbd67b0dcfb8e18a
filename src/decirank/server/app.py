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
A request past the server's ``--max-concurrency`` (default
:data:`DEFAULT_MAX_CONCURRENCY`) is a 503 with ``Retry-After``, once its
body is in; the probes are never refused.

Served on a loopback address, the server answers only requests that name it:
a ``Host`` other than a loopback address or ``localhost`` is a 421, and an
``Origin`` other than a loopback one or one the operator allowed
(``allowed_origins``) a 403, before the key is asked for. A web page the
user opens cannot reach a laptop's server, by a form post nor by
DNS rebinding; and every POST must say ``Content-Type: application/json``
(a 415 otherwise), which a page cannot send across origins without a
preflight the server never grants.

A request whose client goes away is cancelled, so its work (model calls,
``exec:`` commands and their process groups) ends with it.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import sys
import time
import uuid
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._version import __version__
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
from ..stores.runlog import noting_runs
from ._deps import (
    KEY_REQUIRED,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT,
    GuardedRoute,
    RequestBudget,
    ServerSettings,
    SafeJSONResponse,
    key_missing,
    location_of,
    needs_api_key,
    parse_body,
    wants_key,
)
from .page import page_router
from .routes import router
from .tei_infinity import tei_infinity_router

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_CONCURRENCY",
    "ConcurrencyLimit",
    "GuardedRoute",
    "LoopbackOnly",
    "SafeJSONResponse",
    "ServerSettings",
    "create_app",
    "needs_api_key",
    "parse_body",
]

logger = logging.getLogger("decirank.server")

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


def _method_not_allowed(scope: Scope) -> bool:
    """Whether some route has this path but none this method: a 405 whoever asks, as the OpenAPI document says."""
    matches = [route.matches(scope)[0] for route in scope["app"].router.routes]
    return Match.PARTIAL in matches and Match.FULL not in matches


#: The methods a 405's Allow header may name.
_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def _allowed_methods(scope: Scope) -> list[str]:
    """Every method some route serves at this path, as a path may have a route per method (GET and DELETE).

    Each is tried as the router would match it: routers nest, and only matching sees inside them.
    """
    routes = scope["app"].router.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    ]


class ApiKeyFirst(_HTTPMiddleware):
    """Answers 401 to a request under :data:`KEYED_PREFIXES` without the server's API key, before
    its body is read or parsed; the routes' :func:`needs_api_key` checks it again where they run."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        expected = scope["app"].state.settings.api_key
        authorization = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if wants_key(scope["path"]) and key_missing(expected, authorization) and not _method_not_allowed(scope):
            response = JSONResponse({"detail": KEY_REQUIRED}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _is_loopback_name(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: A ``Host`` header or an origin's authority as RFC 9110 has it: a name, an IPv4 address or a bracketed IPv6
#: one, and a port. Nothing else: ``evil.example@127.0.0.1``, ``127.0.0.1/evil.example`` and
#: ``127.0.0.1:8000, evil.example`` read as loopback to a lenient URL parser, and as evil.example to a proxy.
_AUTHORITY = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::[0-9]{1,5})?")


def _host_name(authority: str) -> str:
    """The host of a ``Host`` header or an origin's authority, without its port: ``[::1]:8000`` is ``::1``;
    "" for anything that is not a plain authority."""
    match = _AUTHORITY.fullmatch(authority)
    return match["host"].strip("[]") if match else ""


class LoopbackOnly(_HTTPMiddleware):
    """On a loopback address: 421 to a ``Host`` that is not a loopback name, 403 to a foreign ``Origin``.

    A page on another site that the user opens can send requests to
    127.0.0.1, and after rebinding its own name to 127.0.0.1 it can send them
    with its own ``Host``; neither is a client of this server. The same rules
    as the MCP SDK's DNS-rebinding protection (``decirank mcp -t http``), with
    ``allowed_origins`` (``scheme://host[:port]``, or ``*``) for a page the
    operator serves elsewhere.
    """

    def __init__(self, app: ASGIApp, allowed_origins: Iterable[str] = ()) -> None:
        super().__init__(app)
        self.allowed_origins = {origin.rstrip("/").lower() for origin in allowed_origins}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        host = headers.get(b"host")
        if host is not None and not _is_loopback_name(_host_name(host.decode("latin-1"))):
            message = "this server answers only requests to a loopback address or localhost (Host header)"
            await _refusal(421, "MisdirectedRequestError", message)(scope, receive, send)
            return
        origin = headers.get(b"origin")
        if origin is not None and not self._allowed(origin.decode("latin-1")):
            message = "requests from this origin are refused: pages on other sites may not use this server (Origin)"
            await _refusal(403, "ForbiddenOriginError", message)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, origin: str) -> bool:
        if "*" in self.allowed_origins or origin.rstrip("/").lower() in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        # An origin is a scheme and an authority only: one with a path, query or fragment is no browser's.
        plain = not (parts.path or parts.query or parts.fragment)
        return plain and parts.scheme in ("http", "https") and _is_loopback_name(_host_name(parts.netloc))


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


#: Paths answered however busy the server is: a probe or a scrape must get through when it matters most.
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
#: Requests a process answers at once when the server names no ``max_concurrency``.
DEFAULT_MAX_CONCURRENCY = 256
#: Seconds a refused client is told to wait: about what one request takes.
RETRY_AFTER_SECONDS = 1


class ConcurrencyLimit(_HTTPMiddleware):
    """Answers 503 with ``Retry-After`` at once to a request past ``limit`` already being answered.

    A queue without bound only moves the wait into every client's latency, and
    a request that waited past its client's timeout is work done for nobody.
    Refused at once, the client can try another replica or come back; nothing
    of a refused request runs, so the run log records nothing of it.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit
        # One event loop per process: a plain counter, no lock.
        self.active = 0

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            body = {
                "error": {
                    "type": "OverloadedError",
                    "message": f"the server is answering {self.limit} requests, its limit; "
                    f"retry after {RETRY_AFTER_SECONDS} s",
                    "retry_after": RETRY_AFTER_SECONDS,
                }
            }
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
            await JSONResponse(body, status_code=503, headers=headers)(scope, receive, send)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1


class RequestsInFlight(_HTTPMiddleware):
    """Counts the requests being answered, so that stopping can wait for them.

    On SIGTERM uvicorn cancels what is still running after its grace period
    and goes straight on to the application's shutdown; a cancelled request
    still has to unwind and record its run ``cancelled``, which
    :func:`requests_settled` waits for.
    """

    def __init__(self, app: ASGIApp, state: Any) -> None:
        super().__init__(app)
        self.state = state
        state.requests_in_flight = 0

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.state.requests_in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.state.requests_in_flight -= 1


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


#: The logger of the access log: one line per request, when the server was made with ``access_log``.
access_logger = logging.getLogger("decirank.access")
#: The header a decision's answer names its run in (the routes set it); the access log reads it too.
RUN_ID_HEADER = b"x-decirank-run-id"
#: Characters of a path the access log writes at most: a longer one is cut, saying so.
ACCESS_PATH_CHARS = 200


def _loggable_path(scope: Scope) -> str:
    """The request's path as sent (percent-encoded, so no decoded newline can forge a line), without its query,
    whose values may be secrets; anything not printable escaped, and cut at :data:`ACCESS_PATH_CHARS`."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
    path = raw.split(b"?", 1)[0].decode("latin-1")
    path = "".join(char if char.isprintable() and char != "\\" else f"\\x{ord(char):02x}" for char in path)
    return path if len(path) <= ACCESS_PATH_CHARS else path[:ACCESS_PATH_CHARS] + "..."


class AccessLog(_HTTPMiddleware):
    """One line per request on :data:`access_logger`: method, path, status, milliseconds and the run it made.

    Never the body, nor the query string. The run is the one the request started (any route: the run
    log notes it as it starts), else the one its answer names in ``x-decirank-run-id``. Outside every
    guard, so refusals (401, 413, 503) are logged too; a request whose client left before the answer
    shows ``-`` for the status.
    """

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        began = time.perf_counter()
        status: int | None = None
        header_run: str | None = None

        async def sending(message: Message) -> None:
            nonlocal status, header_run
            if message["type"] == "http.response.start":
                status = message["status"]
                for name, value in message.get("headers", []):
                    if name.lower() == RUN_ID_HEADER:
                        header_run = value.decode("latin-1")
            await send(message)

        with noting_runs() as runs:
            try:
                await self.app(scope, receive, sending)
            finally:
                milliseconds = (time.perf_counter() - began) * 1000
                run = runs[0] if runs else header_run
                access_logger.info(
                    "%s %s %s %.1f ms%s",
                    scope.get("method", "-"),
                    _loggable_path(scope),
                    status if status is not None else "-",
                    milliseconds,
                    f" run {run}" if run else "",
                )


def _access_log_to_stderr() -> None:
    """Send the access log to standard error, once per process, as plain lines (uvicorn's own is turned off)."""
    if any(getattr(handler, "decirank_access", False) for handler in access_logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    handler.decirank_access = True  # type: ignore[attr-defined]
    access_logger.addHandler(handler)
    access_logger.setLevel(logging.INFO)
    access_logger.propagate = False


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


def _over_limits(error: DecirankError) -> bool:
    """Whether no model could take the request because it is over their declared limits (never sent)."""
    if isinstance(error, LimitExceededError):
        return True
    if isinstance(error, AllModelsFailedError) and error.attempts:
        return all(isinstance(getattr(attempt, "error", None), LimitExceededError) for attempt in error.attempts)
    return False


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


def validation_error_object(detail: list[dict[str, Any]]) -> dict[str, Any]:
    """FastAPI's validation ``detail`` as the ``error`` object every other error carries.

    OpenAI's and Cohere's SDKs show ``error.message``; with ``detail`` alone they show nothing useful.
    """
    first = detail[0] if detail else {}
    location = [str(part) for part in first.get("loc", [])]
    field = ".".join(location[1:] if location[:1] in (["body"], ["query"], ["path"]) else location) or "body"
    message = f"{field}: {first.get('msg', 'invalid input')}"
    if len(detail) > 1:
        message += f" (and {len(detail) - 1} more problem{'s' if len(detail) > 2 else ''}: see detail)"
    return {"type": "InvalidInputError", "message": message, "field": field}


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
#: What a loopback server answers to a request that does not name it, or comes from a foreign page.
_LOOPBACK_RESPONSES = {
    "421": _refusal_schema("Served on loopback, and the Host header names another host."),
    "403": _refusal_schema("Served on loopback, and the Origin header names a page the server does not allow."),
}
_MEDIA_TYPE_RESPONSE = _refusal_schema("The body is not declared Content-Type: application/json.")
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
                for status, entry in (*_GUARD_RESPONSES.items(), *_LOOPBACK_RESPONSES.items()):
                    responses.setdefault(status, entry)
                if "requestBody" in operation:
                    responses.setdefault("415", _MEDIA_TYPE_RESPONSE)
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
    max_concurrency: int | None = None,
    metrics_public: bool = False,
    host: str = "127.0.0.1",
    allowed_origins: Iterable[str] = (),
    access_log: bool = False,
) -> FastAPI:
    """The ``decirank serve`` application, answering with ``model`` unless a request names another.

    ``max_body_bytes`` and ``body_timeout`` bound a request's body: its size, and the seconds it may
    take to arrive once the headers have. ``host`` is the address it is served on: on a loopback one,
    requests naming another host, or from a page of an origin not in ``allowed_origins``, are refused.
    ``access_log`` writes a line per request to standard error (:class:`AccessLog`; ``decirank serve`` turns it
    on unless ``--quiet``).

    ``model`` is resolved here, so a server that could not answer fails at start, not on its first request;
    its models are loaded, and the run log opened, when the server starts (the ASGI lifespan), so the first
    request waits for neither and ``/readyz`` says when both are done.
    """
    from .metrics import RequestMetrics, ServerMetrics
    from .probes import probes_router, serving_lifespan

    Decider.resolve(model)
    application = FastAPI(
        lifespan=serving_lifespan,
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
    application.state.settings = ServerSettings(
        model, api_key, max_body_bytes, timeout, allow_exec, max_concurrency, metrics_public
    )
    application.state.metrics = ServerMetrics()
    application.state.model_loaded = False
    application.include_router(router)
    application.include_router(probes_router)
    application.include_router(page_router)  # the page at / and the read-only endpoints it needs
    application.include_router(tei_infinity_router)  # POST /rerank as text-embeddings-inference and Infinity

    @application.exception_handler(DecirankError)
    async def decirank_error(request: Request, error: DecirankError) -> JSONResponse:
        return error_response(error, request)

    @application.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Any:
        # Starlette's 405 names the methods of the first route at the path; Allow lists every route's.
        if error.status_code == 405:
            headers = {**(error.headers or {}), "Allow": ", ".join(_allowed_methods(request.scope))}
            error = StarletteHTTPException(405, error.detail, headers)
        return await http_exception_handler(request, error)

    @application.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which may be what JSON cannot render.
        detail = jsonable_encoder(error.errors())
        return SafeJSONResponse({"detail": detail, "error": validation_error_object(detail)}, status_code=422)

    # A path with a slash too many is a 404, not a redirect to a path that may not be the client's.
    application.router.redirect_slashes = False
    _document_guards(application)

    application.add_middleware(ServerErrors)
    # Inside the body's guard: a client still sending (or stalling) holds no place among the requests answered.
    application.add_middleware(ConcurrencyLimit, limit=max_concurrency or DEFAULT_MAX_CONCURRENCY)
    application.add_middleware(BodyLimit, max_bytes=max_body_bytes, timeout=body_timeout)
    application.add_middleware(ApiKeyFirst)
    if _is_loopback_name(host):
        application.add_middleware(LoopbackOnly, allowed_origins=allowed_origins)
    # Outside the limits, so refused requests are counted too.
    application.add_middleware(RequestMetrics, metrics=application.state.metrics)
    application.add_middleware(RequestId)
    application.add_middleware(RequestsInFlight, state=application.state)
    if access_log:
        _access_log_to_stderr()
        # Outermost: its time is the whole request's, and it sees every answer, refusals included.
        application.add_middleware(AccessLog)
    return application
