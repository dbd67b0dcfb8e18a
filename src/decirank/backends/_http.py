"""What the HTTP backends share: a base class, one client, retries, typed errors, prices and limits.

Retries live here and nowhere else. A call is retried on 408, 429, 5xx and
529, at most ``max_retries`` times (2 by default), after the delay the server
asks for (``retry-after-ms``, then ``Retry-After``) or else an exponential
backoff with jitter. A retry is never started when its delay would end past
the caller's budget (the deadline of the enclosing cancel scope, which a
:class:`~decirank.decisions.toolcall.ToolCall` sets): the error is raised
at once instead, so failover can still use the time that is left.

Connection failures and timeouts are not retried here: the failover policy
sends them to the next model, which is the better use of a shared budget.

Every failure becomes one of the typed errors of :mod:`decirank.errors`,
carrying the model name, the status, the request id and the body.
"""

from __future__ import annotations

import abc
import asyncio
import email.utils
import json
import math
import os
import random
import time
import tomllib
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx

from .._version import __version__
from .._paths import config_file
from ..errors import (
    AuthenticationError,
    ConfigError,
    InvalidAnswerError,
    InvalidInputError,
    MissingKeyError,
    ModelConnectionError,
    ModelError,
    ModelRequestInvalidError,
    ModelTimeoutError,
    OverloadedError,
    RateLimitError,
    ServerError,
    TooLargeError,
)
from ..types.answers import DecisionResponse, Usage
from ..types.limits import ModelLimits
from ..types.questions import DecisionRequest
from .base import Backend

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "HttpBackend",
    "JsonApi",
    "Price",
    "configured_limits",
    "configured_price",
    "error_from_response",
    "find_api_key",
    "priced_usage",
    "request_id_suffix",
    "retry_delay",
    "wire_probability",
    "wire_token_count",
]

DEFAULT_MAX_RETRIES = 2
#: Seconds one HTTP call may take; the caller's budget usually ends it sooner.
DEFAULT_TIMEOUT = 60.0
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
#: A server asking for a longer wait than this is not waited for: the error goes to failover.
MAX_RETRY_AFTER = 60.0
OVERLOADED = 529
REQUEST_ID_HEADERS = ("x-request-id", "request-id")


USER_AGENT = f"decirank/{__version__}"


def is_retriable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def request_id_of(headers: Mapping[str, str]) -> str | None:
    for name in REQUEST_ID_HEADERS:
        if headers.get(name):
            return headers[name]
    return None


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """What the server asked for: ``retry-after-ms``, else ``Retry-After`` in seconds or as a date."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number ``attempt + 1``: the server's word, else backoff with jitter."""
    if retry_after is not None:
        return retry_after
    backoff = min(INITIAL_RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
    # Jitter spreads the retries of concurrent calls that failed together.
    return backoff * (1.0 - 0.25 * random.random())


def _parse_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _message(body: Any) -> str:
    """The readable part of an error body, in the shapes servers use."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return body["message"]
        detail = body.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, dict) and detail.get("message"):
            return str(detail["message"])
        if isinstance(detail, list) and detail:
            return "; ".join(_detail_line(item) for item in detail)
        return json.dumps(body)[:300]
    return str(body)[:300]


def _detail_line(item: Any) -> str:
    if isinstance(item, dict):
        location = ".".join(str(part) for part in item.get("loc", ()))
        return f"{location}: {item.get('msg', '')}" if location else str(item.get("msg", item))
    return str(item)


def error_from_response(response: httpx.Response, *, model: str, key_variable: str | None = None) -> ModelError:
    """The typed error for a response that is not a success; a refused key names where keys come from."""
    status = response.status_code
    body = _parse_body(response)
    message = _message(body) or response.reason_phrase
    common: dict[str, Any] = {
        "model": model,
        "status": status,
        "request_id": request_id_of(response.headers),
        "body": body,
    }
    if status in (401, 403):
        hint = f"; the key comes from {key_variable}" if key_variable else ""
        return AuthenticationError(f"the server refused the key ({status}): {message}{hint}", **common)
    if status == 413 or "max_tokens_exceeded" in json.dumps(body):
        return TooLargeError(f"the request is too large for the model ({status}): {message}", **common)
    if status == 429:
        return RateLimitError(
            f"rate limited (429): {message}", retry_after=retry_after_seconds(response.headers), **common
        )
    if status == OVERLOADED:
        return OverloadedError(f"the server is overloaded (529): {message}", **common)
    if status == 408:
        return ModelTimeoutError(f"the server timed out (408): {message}", **common)
    if status in (400, 422):
        detail = body.get("detail") if isinstance(body, dict) else None
        return ModelRequestInvalidError(
            f"the server rejected the request ({status}): {message}", detail=detail, **common
        )
    if status >= 500:
        return ServerError(f"the server failed ({status}): {message}", **common)
    return ModelError(f"unexpected status {status} from {response.request.url}: {message}", **common)


@dataclass(frozen=True)
class JsonReply:
    body: Any
    request_id: str | None


class JsonApi:
    """JSON over HTTP to one base URL, for one backend instance.

    The ``httpx.AsyncClient`` is created on first use and closed by
    :meth:`aclose`. Backends are cached across calls, and a sync call runs on
    decirank's background loop while a server or a test may run its own; a
    client's connections belong to the loop that opened them, so each event
    loop gets a client of its own, forgotten with the loop.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        key_variable: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.key_variable = key_variable
        self.timeout = timeout
        self.max_retries = max_retries
        self._headers = {"user-agent": USER_AGENT, "accept": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def _client_for_this_loop(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None or client.is_closed:
            client = self._clients[loop] = httpx.AsyncClient(headers=self._headers, timeout=self.timeout)
        return client

    async def post(self, path: str, payload: Any) -> JsonReply:
        """POST ``payload`` to ``base_url + path``; retried as the module says; the parsed JSON reply."""
        url = self.base_url + path
        client = self._client_for_this_loop()
        attempt = 0
        while True:
            response = await self._send(client, url, payload)
            if response.is_success:
                return self._reply(response)
            error = error_from_response(response, model=self.model, key_variable=self.key_variable)
            error.transport_retries = attempt
            if attempt >= self.max_retries or not is_retriable_status(response.status_code):
                raise error
            delay = retry_delay(attempt, retry_after_seconds(response.headers))
            if delay > MAX_RETRY_AFTER or anyio.current_time() + delay >= anyio.current_effective_deadline():
                raise error
            await anyio.sleep(delay)
            attempt += 1

    async def _send(self, client: httpx.AsyncClient, url: str, payload: Any) -> httpx.Response:
        try:
            return await client.post(url, json=payload)
        except httpx.TimeoutException as error:
            raise ModelTimeoutError(f"no answer from {url} within {self.timeout:g} s", model=self.model) from error
        except httpx.TransportError as error:
            reason = str(error) or type(error).__name__
            raise ModelConnectionError(f"cannot reach {url}: {reason}", model=self.model) from error

    def _reply(self, response: httpx.Response) -> JsonReply:
        request_id = request_id_of(response.headers)
        try:
            body = response.json()
        except ValueError:
            raise InvalidAnswerError(
                f"{self.model}: the server's reply is not JSON: {response.text[:200]!r}{request_id_suffix(request_id)}"
            ) from None
        return JsonReply(body, request_id)

    async def aclose(self) -> None:
        """Close this event loop's client; a later call opens a new one."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


def find_api_key(provider: str, given: str | None, variable: str | None, *, required: bool) -> str | None:
    """The key given, else the provider's environment variable; a missing required key names the variable."""
    key = given or (os.environ.get(variable) if variable else None)
    if required and not key:
        assert variable is not None, "a provider that requires a key names its variable"
        raise MissingKeyError(provider, variable)
    return key


def _check_options(base_url: Any, timeout: Any, max_retries: Any) -> None:
    """Options may come from a config file as any TOML value; a wrong one is named before any call."""
    is_url = isinstance(base_url, str) and base_url.lower().startswith(("http://", "https://"))
    if base_url is not None and not is_url:
        raise InvalidInputError("base_url", "an http:// or https:// URL", got=base_url)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise InvalidInputError("timeout", "a number of seconds above 0", got=timeout)
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise InvalidInputError("max_retries", "a whole number of at least 0", got=max_retries)


class HttpBackend(Backend):
    """A model answering over HTTP; subclasses write its wire format, class attributes its host.

    The host's own endpoint needs its key when ``key_required``; a base URL of
    one's own (a proxy, a test server, ``decirank serve``) never requires one.
    """

    #: Where the host listens unless ``base_url`` says otherwise, and the endpoint's path there.
    default_base_url: ClassVar[str]
    path: ClassVar[str]
    #: Environment variable holding the key; None where the host takes none.
    key_variable: ClassVar[str | None] = None
    key_required: ClassVar[bool] = False
    #: What the host declares; the config file's ``[limits."provider:model"]`` overrides it.
    declared_limits: ClassVar[ModelLimits] = ModelLimits()
    #: A model on one's own machine has no bill; a hosted one costs what the server reports
    #: (``usage.cost``), else what the config file's price table says, else is unknown.
    self_hosted: ClassVar[bool] = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        super().__init__(model)
        _check_options(base_url, timeout, max_retries)
        api_key = find_api_key(
            self.provider, api_key, self.key_variable, required=self.key_required and base_url is None
        )
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.api = JsonApi(
            self.base_url,
            model=self.name,
            api_key=api_key,
            key_variable=self.key_variable,
            timeout=timeout,
            max_retries=max_retries,
        )
        path, entries = _config_entries(self.name)
        self._limits = configured_limits(entries.get("limits"), self.declared_limits, f'{path}: limits."{self.name}"')
        builtin_price = SELF_HOSTED_PRICE if self.self_hosted else None
        self.price = configured_price(entries.get("prices"), builtin_price, f'{path}: prices."{self.name}"')

    @property
    def limits(self) -> ModelLimits:
        return self._limits

    @abc.abstractmethod
    def request_body(self, request: DecisionRequest) -> Any:
        """The JSON body that asks ``request``."""

    @abc.abstractmethod
    def read_reply(self, request: DecisionRequest, body: Any, request_id: str | None) -> DecisionResponse:
        """The typed answers in a reply's body; :class:`InvalidAnswerError` when it is malformed."""

    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        reply = await self.api.post(self.path, self.request_body(request))
        return self.read_reply(request, reply.body, reply.request_id)

    async def aclose(self) -> None:
        await self.api.aclose()


# --- reading replies: what both wire formats decode alike ---------------------------------


def request_id_suffix(request_id: str | None) -> str:
    """How a message about a reply names the server's request id, so the host can find the call."""
    return f" (request id {request_id})" if request_id else ""


def wire_probability(value: Any, where: str) -> float:
    """A number as sent; whether it lies in [0, 1] is checked later, for every backend, by ``check_response``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidAnswerError(f"{where}: expected a probability, got {value!r}")
    return float(value)


def wire_token_count(value: Any) -> int:
    """A token count as reported; a missing or malformed one counts as 0 rather than failing the answers."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def priced_usage(
    input_tokens: int, output_tokens: int, price: Price | None, *, cached_tokens: int = 0, reported_cost: Any = None
) -> Usage:
    """One call's usage, costed by the server's own figure, else by the price table, else unknown (None)."""
    if isinstance(reported_cost, int | float) and not isinstance(reported_cost, bool) and math.isfinite(reported_cost):
        cost: float | None = float(reported_cost)
        currency = "USD"
    elif price is not None:
        cost, currency = price.cost(input_tokens, output_tokens), price.currency
    else:
        cost, currency = None, "USD"
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
        cost=cost,
        currency=currency,
        calls=1,
    )


# --- prices and limits: built-in per model, overridden by the config file -----------------


@dataclass(frozen=True)
class Price:
    """What a model costs, per million tokens."""

    input: float
    output: float
    currency: str = "USD"

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


SELF_HOSTED_PRICE = Price(input=0.0, output=0.0)


def _config_entries(model_name: str) -> tuple[Path, dict[str, Any]]:
    """The config file, and ``model_name``'s entries in its ``[prices]`` and ``[limits]`` tables, from one read."""
    path = config_file()
    if not path.is_file():
        return path, {}
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read the config file {path}: {error}") from error
    entries = {}
    for section in ("prices", "limits"):
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{section}] must be a table of model names")
        if model_name in table:
            entries[section] = table[model_name]
    return path, entries


def _number(value: Any, where: str, *, integer: bool = False, minimum: int = 0) -> Any:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) or value < minimum:
        expected = "a whole number" if integer else "a number"
        raise ConfigError(f"{where} must be {expected} of at least {minimum}, not {value!r}")
    return value


def configured_price(entry: Any, builtin: Price | None, where: str) -> Price | None:
    """A ``[prices."provider:model"]`` entry (``input`` and ``output`` per million tokens) over ``builtin``.

    ``where`` names the entry in error messages.
    """
    if entry is None:
        return builtin
    if not isinstance(entry, dict) or not {"input", "output"} <= set(entry):
        raise ConfigError(f"{where} needs input and output prices per million tokens")
    currency = entry.get("currency", "USD")
    if not isinstance(currency, str):
        raise ConfigError(f"{where}.currency must be a currency code such as USD")
    return Price(_number(entry["input"], f"{where}.input"), _number(entry["output"], f"{where}.output"), currency)


#: The least each limit can be: a choice or a score needs two options or levels to mean anything.
_LIMIT_MINIMUMS = {"max_options": 2, "max_questions": 1, "max_levels": 2, "context_tokens": 1}


def configured_limits(entry: Any, builtin: ModelLimits, where: str) -> ModelLimits:
    """A ``[limits."provider:model"]`` entry over ``builtin``; ``where`` names the entry in error messages."""
    if entry is None:
        return builtin
    if not isinstance(entry, dict) or not set(entry) <= set(_LIMIT_MINIMUMS):
        raise ConfigError(f"{where} takes only {', '.join(_LIMIT_MINIMUMS)}")
    given = {
        key: _number(value, f"{where}.{key}", integer=True, minimum=_LIMIT_MINIMUMS[key])
        for key, value in entry.items()
    }
    return ModelLimits(**{key: given.get(key, getattr(builtin, key)) for key in _LIMIT_MINIMUMS})
