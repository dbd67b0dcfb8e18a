"""The FastAPI application: settings, the guards around every request, and error mapping.

Errors keep their types on the wire. Bad input is a 422 whose ``detail``
names the field (FastAPI's own for a misshapen body, the tools' for a
meaning they refuse, :func:`parse_body`'s for a body that is not strict JSON:
malformed, NaN or Infinity, a lone surrogate); a request over a model's
declared limits is a 413 stating the limit; a decision that could not be had
is a 502, or a 504 when time ran out (saying after how long, and whose limit
that was), with the typed error as ``error``; a request over the size limit
is a 413 before anything reads it; a request past the server's
``--max-concurrency`` is a 503 with ``Retry-After``, at once. Bad input never
yields a 500, and nothing escapes as an exception to the HTTP server, which
would drop the connection.

A request whose client goes away is cancelled, so its work (model calls,
``exec:`` commands and their process groups) ends with it.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from email.message import Message as MimeHeader
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
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
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT",
    "ConcurrencyLimit",
    "GuardedRoute",
    "SafeJSONResponse",
    "ServerSettings",
    "create_app",
    "parse_body",
]

logger = logging.getLogger("decirank.server")

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
    #: Requests this process answers at once; past it a request gets 503 and Retry-After. None: no limit.
    max_concurrency: int | None = None
    #: Whether /metrics is open to anyone when ``api_key`` is set (else it wants the key too).
    metrics_public: bool = False


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


def _path_text(location: list[str | int]) -> str:
    return ".".join(str(part) for part in location) or "the body"


def _first_unfit(document: Any) -> BodyError | None:
    """The first value (in document order) that JSON or UTF-8 cannot carry: NaN, ±Infinity, a lone surrogate."""
    stack: list[tuple[list[str | int], Any]] = [([], document)]
    while stack:
        location, value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                return BodyError(
                    location,
                    "text without lone surrogates",
                    detail=f"got the lone surrogate {_clean_text(value[error.start : error.end])}, "
                    "which UTF-8 cannot encode",
                    kind="string_unicode",
                )
        elif isinstance(value, float):
            if not math.isfinite(value):
                return BodyError(
                    location,
                    "a finite number",
                    detail=f"got {json.dumps(value)}; JSON has no NaN or Infinity",
                    kind="finite_number",
                )
        elif isinstance(value, dict):
            children: list[tuple[list[str | int], Any]] = []
            for key, item in value.items():
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    return BodyError(
                        [*location, _clean_text(key)],
                        "keys without lone surrogates",
                        detail=f"the key {_clean_text(key)!r} in {_path_text(location)} holds a lone "
                        "surrogate, which UTF-8 cannot encode",
                        kind="string_unicode",
                    )
                children.append(([*location, key], item))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([([*location, index], item) for index, item in enumerate(value)]))
    return None


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
        raise BodyError([], "a JSON document", detail="nested too deeply", kind="json_invalid") from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        detail = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise BodyError([], "a JSON document", detail=detail, kind="json_invalid") from None
    unfit = _first_unfit(document)
    if unfit is not None:
        raise unfit
    return document


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this content type as JSON (it does when none is given)."""
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

        async def guarded(request: Request) -> Response:
            parsed = _ParsedRequest(request.scope, request.receive)
            if _is_json(parsed.headers.get("content-type")) and await parsed.body():
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


class BodyLimit(_HTTPMiddleware):
    """Answers 413 to a body over ``max_bytes``, declared or (when chunked) as it arrives.

    The body is read here in full, then handed on: the endpoints parse it
    whole anyway, and reading it first means nothing else runs on a body that
    will be refused. From then on this layer listens for the client going
    away, and cancels the request's work when it does.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
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
        await _cancelled_on_disconnect(self.app, scope, bytes(body), receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {"error": {"type": "TooLargeError", "message": f"the request body is over {self.max_bytes} bytes"}},
            status_code=413,
        )
        await response(scope, receive, send)


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


async def requests_settled(state: Any, timeout: float) -> bool:
    """Wait until no request is being answered, at most ``timeout`` seconds; whether none is."""
    with anyio.move_on_after(timeout):
        while getattr(state, "requests_in_flight", 0):
            await anyio.sleep(0.02)
    return not getattr(state, "requests_in_flight", 0)


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


def _location(field: str, where: str = "body") -> list[str | int]:
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
        location = getattr(error, "location", None) or _location(field, where)
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


def create_app(
    model: str = DEFAULT_ROLE,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    allow_exec: bool = False,
    max_concurrency: int | None = None,
    metrics_public: bool = False,
) -> FastAPI:
    """The ``decirank serve`` application, answering with ``model`` unless a request names another.

    ``model`` is resolved here, so a server that could not answer fails at start, not on its first request;
    its models are loaded, and the run log opened, when the server starts (the ASGI lifespan), so the first
    request waits for neither and ``/readyz`` says when both are done.
    """
    from .metrics import RequestMetrics, ServerMetrics
    from .probes import probes_router, serving_lifespan
    from .routes import router

    Decider.resolve(model)
    application = FastAPI(
        lifespan=serving_lifespan,
        default_response_class=SafeJSONResponse,
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
    from .page import page_router  # the page at / and the read-only endpoints it needs

    application.include_router(page_router)

    @application.exception_handler(DecirankError)
    async def decirank_error(request: Request, error: DecirankError) -> JSONResponse:
        return error_response(error, request)

    @application.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which may be what JSON cannot render.
        return SafeJSONResponse({"detail": jsonable_encoder(error.errors())}, status_code=422)

    application.add_middleware(ServerErrors)
    application.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    if max_concurrency is not None:
        application.add_middleware(ConcurrencyLimit, limit=max_concurrency)
    # Outside the limit, so refused requests are counted too.
    application.add_middleware(RequestMetrics, metrics=application.state.metrics)
    application.add_middleware(RequestId)
    application.add_middleware(RequestsInFlight, state=application.state)
    return application


def settings_of(request: Request) -> ServerSettings:
    settings: Any = request.app.state.settings
    return settings
