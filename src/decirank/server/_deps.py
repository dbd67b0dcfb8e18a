"""What every router of ``decirank serve`` depends on: settings, strict bodies, the key, the error statuses.

The application (``app``) and its routers (``routes``, ``page``) all import
from here and never from each other, so imports only point down.
"""

from __future__ import annotations

import json
import math
import secrets
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from email.message import Message as MimeHeader
from typing import Any

import anyio

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from .._jsonpath import first_unfit, too_deep_in_text
from ..decisions.decider import DEFAULT_ROLE
from ..errors import InvalidInputError
from ..tools._checks import MAX_ITEMS
from . import wire

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT",
    "KEYED_PREFIXES",
    "KEY_REQUIRED",
    "BodyError",
    "GuardedRoute",
    "RequestBudget",
    "SafeJSONResponse",
    "ServerSettings",
    "check_item_counts",
    "clean_text",
    "error_responses",
    "key_missing",
    "location_of",
    "needs_api_key",
    "parse_body",
    "requests_settled",
    "settings_of",
    "wants_key",
]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
#: Seconds a client has to send a request's whole body once its headers are in.
DEFAULT_BODY_TIMEOUT = 10.0
#: Seconds a request may take when it names no budget of its own.
DEFAULT_TIMEOUT = 30.0
#: Bodies up to this size are parsed on the event loop (under a millisecond); a larger one, up to the
#: 4 MiB limit, takes up to seconds, and is parsed in a worker thread while other requests are answered.
INLINE_PARSE_BYTES = 64 * 1024


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


def _sanitized(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {clean_text(str(key)): _sanitized(item) for key, item in value.items()}
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


async def requests_settled(state: Any, timeout: float) -> bool:
    """Wait until no request is being answered, at most ``timeout`` seconds; whether none is."""
    with anyio.move_on_after(timeout):
        while getattr(state, "requests_in_flight", 0):
            await anyio.sleep(0.02)
    return not getattr(state, "requests_in_flight", 0)


def settings_of(request: Request) -> ServerSettings:
    settings: Any = request.app.state.settings
    return settings


@dataclass(frozen=True)
class RequestBudget:
    """A request's time budget as the server gave it, and what it was for; the 504 says both."""

    seconds: float
    #: Whose limit it is: the request's ``timeout`` or the server's ``--timeout``.
    source: str
    #: The size of the work, e.g. "10000 documents".
    work: str | None = None


# --- the body: strict JSON, parsed once ------------------------------------------------------


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot carry) shown as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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
    location = [clean_text(part) if isinstance(part, str) else part for part in found.path]
    return BodyError(location, found.expected, detail=found.problem, kind=found.kind)


def location_of(field: str, where: str = "body") -> list[str | int]:
    """An error's location as FastAPI gives it: ``where`` and the dotted field's parts, positions as numbers."""
    # Only ASCII digits are a position: "³".isdigit() is true, and int() refuses it.
    return [where, *(int(part) if part.isascii() and part.isdigit() else part for part in field.split("."))]


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
        location = [clean_text(part) if isinstance(part, str) else part for part in deep.path]
        raise BodyError(location, deep.expected, detail=deep.problem, kind=deep.kind) from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        detail = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise BodyError([], "a JSON document", detail=detail, kind="json_invalid") from None
    unfit = _first_unfit(document)
    if unfit is not None:
        raise unfit
    return document


def _is_json(content_type: str | None) -> bool:
    """Whether a body of this content type is JSON: ``application/json`` or ``application/*+json``."""
    if not content_type:
        return False
    header = MimeHeader()
    header["content-type"] = content_type
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


#: What a body that is not declared JSON is told.
NOT_JSON = "the body must be sent with Content-Type: application/json"


class _ParsedRequest(Request):
    """A request whose JSON body :func:`parse_body` has already checked and parsed."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if len(body) <= INLINE_PARSE_BYTES:
                self._json = parse_body(body)
            else:
                self._json = await anyio.to_thread.run_sync(parse_body, body)
        return self._json


def check_item_counts(document: Any) -> None:
    """Refuse a body whose top-level array (``items``, ``documents``, ``texts``, ``refs``) holds more than
    :data:`~decirank.tools._checks.MAX_ITEMS` values, before FastAPI validates it value by value.

    The tools refuse the same with the same error; here it costs no more than a length, where a million
    values would hold the event loop for seconds on their way to the tool.
    """
    if not isinstance(document, dict):
        return
    for key, value in document.items():
        if isinstance(value, list) and len(value) > MAX_ITEMS:
            field = clean_text(str(key))
            raise BodyError(
                [field],
                f"at most {MAX_ITEMS} items in one call",
                detail=f"{len(value)} were given; send the rest in further calls, or a file to decirank batch",
                kind="too_long",
            )


class GuardedRoute(APIRoute):
    """A route whose JSON body is parsed strictly before FastAPI reads it, so a bad one is a 422 naming it.

    A body must be declared ``application/json``: anything else is a 415. A web
    page may send a form or ``text/plain`` (or no type at all) to any address
    without asking first; it may send JSON to another origin only after a
    CORS preflight, which this server never grants.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        takes_body = self.body_field is not None

        async def guarded(request: Request) -> Response:
            parsed = _ParsedRequest(request.scope, request.receive)
            if takes_body and not _is_json(parsed.headers.get("content-type")):
                given = parsed.headers.get("content-type")
                error = {
                    "type": "UnsupportedMediaTypeError",
                    "message": f"{NOT_JSON} (it was sent with {f'{given!r}' if given else 'none'})",
                    "field": "content-type",
                }
                return SafeJSONResponse({"error": error}, status_code=415)
            # A route without a body ignores one sent anyway (a GET with a body), as FastAPI does.
            if takes_body and await parsed.body():
                # A BodyError here goes to the error handlers, as any DecirankError.
                check_item_counts(await parsed.json())
            return await handler(parsed)

        return guarded


# --- the key and the error statuses ----------------------------------------------------------


KEY_REQUIRED = "a valid API key is required: Authorization: Bearer <key>"


def key_missing(expected: str | None, authorization: str) -> bool:
    """Whether an ``Authorization`` header fails to give the server's key (never, when it has none)."""
    if expected is None:
        return False
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), expected.encode())


def needs_api_key(request: Request) -> None:
    """The dependency of every route that wants the server's API key (when it has one).

    The ``ApiKeyFirst`` middleware refuses a request without it before the body is read; this checks
    again where the route runs, so a route is never open for want of the middleware.
    """
    if key_missing(settings_of(request).api_key, request.headers.get("authorization", "")):
        raise HTTPException(status_code=401, detail=KEY_REQUIRED, headers={"WWW-Authenticate": "Bearer"})


#: The paths the API key guards: the API's, whatever the route (one added later, or none: a 404).
KEYED_PREFIXES = ("/v1/", "/v2/")
#: Keyed paths outside those prefixes: ``/rerank``, where text-embeddings-inference and Infinity serve it.
KEYED_PATHS = ("/rerank",)


def wants_key(path: str) -> bool:
    return path.startswith(KEYED_PREFIXES) or path in KEYED_PATHS


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI entries of the error statuses a route can answer with."""
    documented: dict[int, dict[str, Any]] = {
        401: {"model": wire.HTTPErrorBody, "description": "An API key is required and was missing or wrong."},
        404: {"model": wire.HTTPErrorBody, "description": "No such run or calibration, or the run log is off."},
        413: {
            "model": wire.ErrorBody,
            "description": "The body is over the server's size limit, or the request over the model's "
            "declared limits (LimitExceededError, whose message states the limit).",
        },
        422: {
            "model": wire.ValidationErrorBody,
            "description": "Bad input: not JSON, NaN or Infinity, a lone surrogate, a misshapen body or a "
            "meaning the tool refuses; detail locates the field.",
        },
        502: {"model": wire.ErrorBody, "description": "The decision could not be had: the typed error."},
        503: {
            "model": wire.ErrorBody,
            "description": "The server's own configuration cannot answer, or it is answering its --max-concurrency "
            "requests already (OverloadedError, with Retry-After).",
        },
        504: {
            "model": wire.ErrorBody,
            "description": "The time budget ran out; the message says after how long and whose limit it was.",
        },
    }
    return {status: documented[status] for status in statuses}
