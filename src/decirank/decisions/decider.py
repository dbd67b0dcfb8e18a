"""A role or a model name, resolved to the chain of models that answers for it.

``decider`` is the default role. With no configuration it is the embedded
``local`` model; the config file or ``DECIRANK_ROLE_<NAME>`` may give any
role a primary model and fallbacks (see :mod:`.roles`). A plain
``provider:model`` name is a chain of one.

:meth:`Decider.decide` asks the chain under the failover policy of
:mod:`.failover`, inside the tool call's :class:`~.budget.Budget`, and
reports every attempt (cache hits, skips, failures, the cancelled one) to
its caller, which records them in the run log.

A link of a chain that cannot be used (its provider needs an API key that is
not set) keeps its place as an :class:`UnusableBackend`: each decision skips
it as a failed attempt, so the run log and stderr say why the fallback
answered. A chain whose every link is unusable is the first link's error.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import anyio

from .._config import load_config
from ..backends import Backend, create_backend, parse_model_name
from ..errors import AllModelsFailedError, DecisionTimeoutError, InvalidInputError, MissingKeyError, UnknownModelError
from ..types.answers import DecisionResponse, check_response
from ..types.limits import ModelLimits
from ..types.questions import DecisionRequest
from .budget import Budget
from .failover import Attempt, Failover, FailoverWarning
from .roles import DEFAULT_ROLE, check_provider_sections, provider_options, resolve_chain

__all__ = ["DEFAULT_ROLE", "AnswerCache", "Decider", "UnusableBackend"]


class AnswerCache(Protocol):
    """What the decider needs of a decision cache (:class:`decirank.stores.cache.DecisionCache`)."""

    def get(self, model: str, request: DecisionRequest) -> DecisionResponse | None: ...

    def put(self, request: DecisionRequest, response: DecisionResponse) -> None: ...


def _ignore(attempt: Attempt) -> None:
    pass


class UnusableBackend(Backend):
    """A link of a role's chain that cannot be asked: its provider needs an API key that is not set.

    It answers nothing; failover moves past it (and past its provider's other models).
    """

    def __init__(self, full_name: str, error: MissingKeyError) -> None:
        provider, _, model = full_name.partition(":")
        super().__init__(model)
        self.provider = provider  # type: ignore[misc]  # a class attribute on real backends
        self.error = error

    @property
    def limits(self) -> ModelLimits:
        return ModelLimits()

    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        # A new error each time: raising one instance again would grow its traceback on every decision.
        raise MissingKeyError(self.error.provider, self.error.variable)


class Decider:
    """The models that answer for one role, in the order they are tried."""

    def __init__(self, name: str, chain: Sequence[Backend]):
        if not chain:
            raise UnknownModelError(name)
        self.name = name
        self.chain = list(chain)

    @classmethod
    def resolve(cls, name: str = DEFAULT_ROLE, **backend_options: Any) -> Decider:
        """``name`` is a role (``decider``) or an explicit ``provider:model`` name.

        Each backend gets its provider's options from the config, then
        ``backend_options`` (``base_url``, ...) given here, which win.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("model", "a role such as 'decider' or a model name such as 'local'", got=name)
        config = load_config()
        check_provider_sections(config)
        chain = resolve_chain(name.strip(), config)
        explicit = {option: value for option, value in backend_options.items() if value is not None}
        names = chain.full_model_names()
        # An explicit option (a Client's api_key) goes to each model of the chain that takes it, so a
        # hosted primary gets its key and a local fallback is not refused for it; one that no model
        # of the chain takes is refused, naming the option.
        takes = {full_name: set(parse_model_name(full_name)[0].options) for full_name in names}
        for option in explicit:
            if not any(option in accepted for accepted in takes.values()):
                create_backend(names[0], **{option: explicit[option]})  # raises, naming the option
        backends: list[Backend] = []
        for full_name in names:
            provider = full_name.partition(":")[0]
            own = {option: value for option, value in explicit.items() if option in takes[full_name]}
            try:
                backends.append(create_backend(full_name, **{**provider_options(provider, config), **own}))
            except MissingKeyError as error:
                backends.append(UnusableBackend(full_name, error))
        usable = [backend for backend in backends if not isinstance(backend, UnusableBackend)]
        if not usable:
            first = backends[0]
            assert isinstance(first, UnusableBackend)
            raise first.error
        return cls(chain.name, backends)

    @property
    def limits(self) -> ModelLimits:
        """Limits every model of the chain can take, so a tool's split fits any of them."""
        return ModelLimits.combine(backend.limits for backend in self.chain if not isinstance(backend, UnusableBackend))

    @property
    def model_names(self) -> list[str]:
        return [backend.name for backend in self.chain]

    async def decide(
        self,
        request: DecisionRequest,
        *,
        budget: Budget | None = None,
        on_attempt: Callable[[Attempt], None] = _ignore,
        cache: AnswerCache | None = None,
    ) -> DecisionResponse:
        """Ask the chain's models under the failover policy until one answers every question well.

        Raises the one model's error when a single model was tried, else
        :class:`AllModelsFailedError`; a 422 as it is; :class:`DecisionTimeoutError`
        when ``budget`` runs out. A cancellation is reported and re-raised, never failed over.
        """
        budget = budget or Budget.unlimited()
        failover = Failover(self.chain)
        attempts: list[Attempt] = []
        while (backend := failover.next_model()) is not None:
            attempt = await _attempt(backend, request, len(attempts) + 1, budget, cache, on_attempt)
            attempts.append(attempt)
            if attempt.status == "success":
                assert attempt.response is not None
                return attempt.response
            assert isinstance(attempt.error, Exception)
            if isinstance(attempt.error, DecisionTimeoutError):
                raise attempt.error  # the budget is spent: no model can be tried
            retry = failover.after_failure(attempt.error, remaining_budget=budget.remaining())
            following = failover.next_model()
            if retry is None and following is not None:
                _warn_failover(self.name, backend, attempt.error, following)
            if retry is not None:
                with anyio.CancelScope(deadline=budget.deadline) as scope:
                    await anyio.sleep(retry.wait)
                if scope.cancelled_caught:
                    raise budget.expired()
        if len({attempt.model for attempt in attempts}) == 1:
            assert attempts[-1].error is not None
            raise attempts[-1].error
        raise AllModelsFailedError(self.name, attempts)

    def __repr__(self) -> str:
        return f"<Decider {self.name} -> {', '.join(self.model_names)}>"


def _warn_failover(role: str, failed: Backend, error: Exception, following: Backend) -> None:
    """Say on stderr (the command line shows warnings) that ``following`` answers in ``failed``'s place."""
    what = "skipped" if isinstance(failed, UnusableBackend) else "failed"
    message = f"{role}: {failed.name} {what} ({type(error).__name__}: {error}); trying {following.name}"
    warnings.warn(message, FailoverWarning, stacklevel=3)


async def _attempt(
    backend: Backend,
    request: DecisionRequest,
    number: int,
    budget: Budget,
    cache: AnswerCache | None,
    report: Callable[[Attempt], None],
) -> Attempt:
    """One model's try at ``request``: its answer or its error, reported as it ends."""
    started, clock = time.time(), time.perf_counter()

    def ended(status: str, response: DecisionResponse | None = None, error: BaseException | None = None) -> Attempt:
        duration = time.perf_counter() - clock
        attempt = Attempt(backend.name, backend.provider, number, request, started, duration, status, response, error)
        report(attempt)
        return attempt

    if cache is not None:
        hit = cache.get(backend.name, request)
        if hit is not None:
            return ended("success", hit)
    response = None
    try:
        backend.limits.check(request, model=backend.name)
        with anyio.CancelScope(deadline=budget.deadline) as scope:
            response = await backend.decide(request)
        if not scope.cancelled_caught:
            check_response(request, response)
    except anyio.get_cancelled_exc_class():
        # The caller's cancel (the budget's is caught by the scope above): recorded, never failed over.
        ended("cancelled")
        raise
    except Exception as error:
        return ended("failed", response, error)
    if scope.cancelled_caught:
        return ended("failed", error=budget.expired())
    assert response is not None
    if cache is not None:
        cache.put(request, response)
    return ended("success", response)
