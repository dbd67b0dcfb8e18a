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

from fastapi import HTTPException, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

from ..decisions.decider import DEFAULT_ROLE
from ..errors import InvalidInputError
from . import wire

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT",
    "BodyError",
    "GuardedRoute",
    "RequestBudget",
    "ServerSettings",
    "clean_text",
    "error_responses",
    "parse_body",
    "require_api_key",
    "settings_of",
]

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
                    detail=f"got the lone surrogate {clean_text(value[error.start : error.end])}, "
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
                        [*location, clean_text(key)],
                        "keys without lone surrogates",
                        detail=f"the key {clean_text(key)!r} in {_path_text(location)} holds a lone "
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


# --- the key and the error statuses ----------------------------------------------------------


def require_api_key(request: Request) -> None:
    expected = settings_of(request).api_key
    if expected is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), expected.encode()):
        raise HTTPException(
            status_code=401,
            detail="a valid API key is required: Authorization: Bearer <key>",
            headers={"WWW-Authenticate": "Bearer"},
        )


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI entries of the error statuses a route can answer with."""
    documented: dict[int, dict[str, Any]] = {
        401: {"model": wire.HTTPErrorBody, "description": "An API key is required and was missing or wrong."},
        404: {"model": wire.HTTPErrorBody, "description": "No such run, or the run log is off."},
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
        503: {"model": wire.ErrorBody, "description": "The server's own configuration cannot answer."},
        504: {
            "model": wire.ErrorBody,
            "description": "The time budget ran out; the message says after how long and whose limit it was.",
        },
    }
    return {status: documented[status] for status in statuses}
