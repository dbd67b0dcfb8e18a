"""The failover policy: after a model fails, which model is tried next, and when.

Pure logic, no I/O: :class:`Failover` holds the models still to try and is
told each failure; the :class:`~decirank.decisions.decider.Decider` does the
calling, the waiting and the recording.

==========================================  ==========================================
the model raised                            what happens next
==========================================  ==========================================
RateLimitError (429)                        the same model again after ``retry_after``,
                                            at most ``MAX_RATE_LIMIT_RETRIES`` times and
                                            never past the budget, unless the backend's
                                            transport already retried it; then the
                                            next model
ServerError, OverloadedError,               the next model
ModelConnectionError, ModelTimeoutError,
RefusalError, InvalidAnswerError
LimitExceededError (never sent)             the next model
AuthenticationError                         the next model of another provider
MissingKeyError (no API key, never sent)    the next model of another provider
TooLargeError                               the next model declaring a larger context
ModelRequestInvalidError (422)              nothing: the error is raised as it is
==========================================  ==========================================

A cancellation is not a failure and never reaches this policy. Each move to
another model is also a :class:`FailoverWarning`, which the command line
prints on stderr, so a fallback that answered never hides the link that did not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    AuthenticationError,
    InvalidAnswerError,
    MissingKeyError,
    ModelError,
    RateLimitError,
    TooLargeError,
)
from ..types.answers import DecisionResponse, Usage
from ..types.questions import DecisionRequest

__all__ = ["MAX_RATE_LIMIT_RETRIES", "MAX_RETRY_WAIT", "Attempt", "Failover", "FailoverWarning", "Retry"]

#: Times one model is asked again after a rate limit before the next model is tried.
MAX_RATE_LIMIT_RETRIES = 2
#: Longest wait (seconds) a rate limit may ask for; a longer one moves to the next model.
MAX_RETRY_WAIT = 20.0
#: Wait before a retry when the provider did not say, doubled on each retry.
DEFAULT_RETRY_WAIT = 0.5


class FailoverWarning(UserWarning):
    """A model of a role's chain could not answer, and the next one is asked."""


@dataclass(frozen=True)
class Attempt:
    """One call to one model (or a cache look-up standing for it), as the run log records it."""

    model: str
    provider: str
    #: 1 for the first model tried for a decision, counting every retry and failover.
    number: int
    request: DecisionRequest
    #: Wall-clock start (seconds since the epoch) and duration in seconds.
    started: float
    duration: float
    #: ``success``, ``failed`` or ``cancelled``.
    status: str
    response: DecisionResponse | None = None
    error: BaseException | None = None

    @property
    def usage(self) -> Usage:
        return self.response.usage if self.response is not None else Usage()

    @property
    def cached(self) -> bool:
        return self.response is not None and self.response.cached


@dataclass(frozen=True)
class Retry:
    """Ask the same model again after ``wait`` seconds."""

    wait: float


class Failover:
    """The models still to try for one decision, first first."""

    def __init__(
        self,
        chain: Sequence[Any],
        *,
        max_rate_limit_retries: int = MAX_RATE_LIMIT_RETRIES,
        max_retry_wait: float = MAX_RETRY_WAIT,
    ) -> None:
        # Each entry needs ``name``, ``provider`` and ``limits.context_tokens``: backends do.
        self._remaining = list(chain)
        self._max_retries = max_rate_limit_retries
        self._max_wait = max_retry_wait
        self._retries = 0

    def next_model(self) -> Any | None:
        """The model to ask now; None when none is left."""
        return self._remaining[0] if self._remaining else None

    def after_failure(self, error: Exception, *, remaining_budget: float = math.inf) -> Retry | None:
        """Take in the current model's failure: a :class:`Retry` of it, or None to move on.

        Raises ``error`` itself when no model can help (a 422, or a bug that is
        not a model failure).
        """
        if not isinstance(error, ModelError | InvalidAnswerError | MissingKeyError) or (
            isinstance(error, ModelError) and not error.retriable
        ):
            raise error
        failed = self._remaining[0]
        # Retries live in one place: HTTP backends retry a 429 in their transport, and
        # one that still fails there moves on rather than being retried again here.
        if isinstance(error, RateLimitError) and not error.transport_retries and self._retries < self._max_retries:
            wait = error.retry_after if error.retry_after is not None else DEFAULT_RETRY_WAIT * 2**self._retries
            if wait <= min(self._max_wait, remaining_budget):
                self._retries += 1
                return Retry(max(wait, 0.0))
        self._retries = 0
        del self._remaining[0]
        if isinstance(error, AuthenticationError | MissingKeyError):
            self._remaining = [model for model in self._remaining if model.provider != failed.provider]
        elif isinstance(error, TooLargeError):
            context = failed.limits.context_tokens
            self._remaining = [model for model in self._remaining if _larger_context(model, context)]
        return None


def _larger_context(model: Any, than: int | None) -> bool:
    """Only a model that declares a context larger than the failed one's can take the request."""
    declared = model.limits.context_tokens
    return declared is not None and than is not None and declared > than
