"""The one error tree of decirank.

Every error decirank raises on purpose is a :class:`DecirankError`. Foreign
exceptions (httpx, sqlite3, onnxruntime, ...) are converted at the boundary
with ``raise ... from``, so callers only ever catch these::

    DecirankError
    ├── InvalidInputError (also ValueError)   bad arguments: names the field and what was expected
    ├── ConfigError                           configuration that cannot work
    │   ├── UnknownModelError                 a provider, model or role nobody registered
    │   ├── MissingKeyError                   an API key variable is not set
    │   └── MissingAssetError                 an optional part is not installed: model weights or an extra
    ├── DecisionError                         a decision could not be had; no score is ever invented
    │   ├── ModelError                        one model call failed (carries provider, model, status, request id)
    │   │   ├── AuthenticationError           401/403: every model of that provider is skipped
    │   │   ├── RateLimitError                429: the same model is retried after ``retry_after``
    │   │   ├── OverloadedError               529: the next model is tried
    │   │   ├── ServerError                   5xx: the next model is tried
    │   │   ├── ModelConnectionError          network failure: the next model is tried
    │   │   ├── ModelTimeoutError             one call ran out of time: the next model is tried
    │   │   ├── TooLargeError                 413 / max_tokens_exceeded: only larger contexts are tried
    │   │   ├── ModelRequestInvalidError      422: fatal, the request itself is wrong
    │   │   ├── LimitExceededError            over the model's declared limits: that model is skipped
    │   │   └── RefusalError                  the model refused to answer a question
    │   ├── InvalidAnswerError                an answer is missing, of the wrong type, or outside [0, 1]
    │   ├── DecisionTimeoutError (also TimeoutError)  the tool call's time budget ran out
    │   └── AllModelsFailedError              every model of a role failed; carries each attempt
    ├── CancelledError                        a sync call's work was cancelled before it finished (Ctrl-C
    │                                         stays KeyboardInterrupt; async calls raise the event loop's
    │                                         own cancellation)
    ├── StoreError                            the run log, cache or artifact store failed
    └── PlanError                             a plan could not be run; its own branches are drawn in
                                              :mod:`decirank.plans.errors`
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AllModelsFailedError",
    "AuthenticationError",
    "CancelledError",
    "ConfigError",
    "DecirankError",
    "DecisionError",
    "DecisionTimeoutError",
    "InvalidAnswerError",
    "InvalidInputError",
    "LimitExceededError",
    "MissingAssetError",
    "MissingKeyError",
    "ModelConnectionError",
    "ModelError",
    "ModelRequestInvalidError",
    "ModelTimeoutError",
    "OverloadedError",
    "RateLimitError",
    "RefusalError",
    "ServerError",
    "StoreError",
    "TooLargeError",
    "UnknownModelError",
    "error_record",
]


class DecirankError(Exception):
    """Base class of every error decirank raises on purpose."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description, used by the HTTP server, MCP and the run log."""
        return {"type": type(self).__name__, "message": str(self)}


class InvalidInputError(DecirankError, ValueError):
    """An argument is not what a tool or command expects."""

    def __init__(self, field: str, expected: str, *, got: Any = None, detail: str | None = None):
        self.field = field
        self.expected = expected
        self.detail = detail
        message = f"{field}: expected {expected}"
        if detail:
            message += f" ({detail})"
        elif got is not None:
            message += f", got {_describe_value(got)}"
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "field": self.field, "expected": self.expected}


class ConfigError(DecirankError):
    """Configuration that cannot work: a bad config file, a role without models."""


class UnknownModelError(ConfigError):
    """A provider, model or role that is not registered."""

    def __init__(self, name: str, *, known: Sequence[str] = (), suggestion: str | None = None):
        self.name = name
        self.suggestion = suggestion
        message = f"unknown model or role {name!r}"
        if suggestion:
            message += f"; did you mean {suggestion!r}?"
        if known:
            message += f" (known: {', '.join(sorted(known))})"
        super().__init__(message)


class MissingKeyError(ConfigError):
    """A provider needs an API key and its environment variable is not set."""

    def __init__(self, provider: str, variable: str):
        self.provider = provider
        self.variable = variable
        super().__init__(f"{provider} needs an API key: set the environment variable {variable}")


class MissingAssetError(ConfigError):
    """An optional part is not installed: an embedded model's weights, or an extra such as ``server``."""

    def __init__(self, what: str, fix: str):
        self.fix = fix
        super().__init__(f"{what} is not installed; fix it with: {fix}")


class DecisionError(DecirankError):
    """A decision could not be had. No score is ever invented in its place."""


class ModelError(DecisionError):
    """One call to one model failed."""

    #: Whether the failover policy may try this call again on some model.
    retriable = True
    #: How often the backend's own transport already retried the call (HTTP retries 429s
    #: itself), so failover does not retry the same model a second time over.
    transport_retries = 0

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        body: Any = None,
    ):
        self.model = model
        self.status = status
        self.request_id = request_id
        self.body = body
        prefix = f"{model}: " if model else ""
        suffix = f" (request id {request_id})" if request_id else ""
        super().__init__(f"{prefix}{message}{suffix}")

    @property
    def provider(self) -> str | None:
        return self.model.split(":", 1)[0] if self.model else None

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        for key in ("model", "status", "request_id"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data


class AuthenticationError(ModelError):
    """The provider refused the key (401/403)."""


class RateLimitError(ModelError):
    """The provider asks to slow down (429); ``retry_after`` is in seconds when it said."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any):
        self.retry_after = retry_after
        super().__init__(message, **kwargs)


class OverloadedError(ModelError):
    """The provider is overloaded (529)."""


class ServerError(ModelError):
    """The provider failed (5xx)."""


class ModelConnectionError(ModelError):
    """The provider could not be reached."""


class ModelTimeoutError(ModelError):
    """One model call took longer than it was allowed."""


class TooLargeError(ModelError):
    """The request is larger than the model's context (413, ``max_tokens_exceeded``)."""


class ModelRequestInvalidError(ModelError):
    """The provider rejected the request as invalid (422); retrying cannot help."""

    retriable = False

    def __init__(self, message: str, *, detail: Any = None, **kwargs: Any):
        self.detail = detail
        super().__init__(message, **kwargs)


class LimitExceededError(ModelError):
    """The request is over a limit the model declares; it was never sent."""


class RefusalError(ModelError):
    """The model refused to answer a question."""

    def __init__(self, message: str, *, question_id: str | None = None, **kwargs: Any):
        self.question_id = question_id
        super().__init__(message, **kwargs)


class InvalidAnswerError(DecisionError):
    """An answer is missing, of the wrong type, or has probabilities outside [0, 1]."""


class DecisionTimeoutError(DecisionError, TimeoutError):
    """The tool call's time budget ran out before every decision was had."""

    def __init__(
        self, timeout: float, *, what: str = "decision", finished: int | None = None, asked: int | None = None
    ):
        self.timeout = timeout
        self.what = what
        #: How many of the ``asked`` model calls of the tool call had finished, where it counted them.
        self.finished = finished
        self.asked = asked
        message = f"{what} did not finish within its budget of {timeout:g} s"
        if finished is not None and asked is not None:
            message += f"; {finished} of {asked} model calls finished"
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        data = {**super().to_dict(), "timeout": self.timeout}
        if self.finished is not None and self.asked is not None:
            data.update(finished=self.finished, asked=self.asked)
        return data


class AllModelsFailedError(DecisionError):
    """Every model of a role failed; ``attempts`` holds what each one said."""

    def __init__(self, role: str, attempts: Sequence[Any]):
        self.role = role
        self.attempts = list(attempts)
        tried = "; ".join(str(getattr(a, "error", a)) for a in self.attempts) or "no model could take it"
        super().__init__(f"every model of {role!r} failed: {tried}")


class CancelledError(DecirankError):
    """A sync call's work was cancelled on the background loop before it finished.

    Ctrl-C while waiting cancels the work too, but is raised as the
    ``KeyboardInterrupt`` it is, so that ``except DecirankError`` never swallows it.
    """


class StoreError(DecirankError):
    """The run log, the decision cache or the artifact store failed."""


def error_record(error: BaseException) -> dict[str, Any]:
    """A JSON-ready description of any error, as the run log keeps it."""
    if isinstance(error, DecirankError):
        return error.to_dict()
    return {"type": type(error).__name__, "message": str(error) or type(error).__name__}


def _describe_value(value: Any) -> str:
    kind = type(value).__name__
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind} {text}"
