"""One tool invocation: its decider, its single time budget, its usage and its run.

Every tool opens a :class:`ToolCall` and asks its questions through it, so the
budget, the concurrency of split work, cancellation, usage accounting and the
run log are written once, here, for every tool. The call is a run in the run
log from enter to exit; each model attempt the decider reports becomes one of
its children.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio

from ..errors import DecisionTimeoutError, InvalidInputError, error_record
from ..stores.cache import DecisionCache, current_cache
from ..stores.runlog import (
    RunLog,
    current_parent_run,
    current_runlog,
    new_run_id,
    note_run_started,
    summarize,
)
from ..tracing import ToolSpan, start_tool_span
from ..types.answers import DecisionResponse, Usage
from ..types.questions import DecisionRequest
from ..types.records import answers_to_data, request_to_data
from .budget import Budget
from .decider import DEFAULT_ROLE, Decider
from .failover import Attempt
from .observers import current_observer

__all__ = ["ToolCall", "check_timeout", "gather"]

T = TypeVar("T")


async def gather(jobs: Sequence[Callable[[], Awaitable[T]]], *, concurrency: int | None = None) -> list[T]:
    """Run ``jobs`` concurrently, at most ``concurrency`` at once (None: all); the first failure cancels the
    rest and is raised as is."""
    results: list[Any] = [None] * len(jobs)
    failure: BaseException | None = None
    limiter = anyio.CapacityLimiter(concurrency) if concurrency is not None else None

    async with anyio.create_task_group() as group:

        async def run(index: int, job: Callable[[], Awaitable[T]]) -> None:
            nonlocal failure
            try:
                if limiter is None:
                    results[index] = await job()
                else:
                    async with limiter:
                        results[index] = await job()
            except Exception as error:  # the first one wins; siblings are cancelled, not failed
                if failure is None:
                    failure = error
                group.cancel_scope.cancel()

        for index, job in enumerate(jobs):
            group.start_soon(run, index, job)
    if failure is not None:
        raise failure
    return results


def check_timeout(timeout: float | None) -> float | None:
    """A tool call's budget in seconds (None: no budget); infinity is allowed, as no budget."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0 or math.isnan(timeout):
        raise InvalidInputError("timeout", "a number of seconds greater than 0", got=timeout)
    return float(timeout)



class ToolCall:
    """Use as ``async with ToolCall("rank", model=...) as call: await call.ask(request)``.

    ``inputs`` are the tool's arguments, kept (shortened) in the run log.
    ``model=None`` is a tool call that asks no model (score_list with an
    ``exec:`` evaluator): it is still a run, and resolves no model.
    """

    def __init__(
        self,
        tool: str,
        *,
        model: str | None = DEFAULT_ROLE,
        timeout: float | None = None,
        backend_options: dict[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
    ) -> None:
        self.tool = tool
        self.model = model
        self.timeout = check_timeout(timeout)
        self.run_id = new_run_id()
        #: Everything the call's model attempts consumed, the failed ones included.
        self.usage = Usage()
        self.decider: Decider | None = None
        self._backend_options = backend_options or {}
        self._inputs = inputs
        self._outputs: Any = None
        self._answered_by: list[str] = []
        self._decisions = 0
        #: Decisions asked that were answered, for a timeout to say how far the call got.
        self._answered = 0
        self._budget = Budget.unlimited()
        self._runlog: RunLog | None = None
        self._cache: DecisionCache | None = None
        self._span: ToolSpan | None = None
        self._started = 0.0
        self._clock = 0.0

    async def __aenter__(self) -> ToolCall:
        self._started, self._clock = time.time(), time.perf_counter()
        note_run_started(self.run_id)
        self._runlog = current_runlog()
        if self._runlog is not None:
            self._runlog.start_run(
                self.run_id,
                tool=self.tool,
                role=self.model,
                inputs=summarize(self._inputs),
                started=self._started,
                parent_id=current_parent_run(),
            )
        try:
            # The OpenTelemetry span, when tracing is on (decirank.tracing); None costs nothing.
            self._span = start_tool_span(self.tool, run_id=self.run_id, role=self.model, inputs=self._inputs)
            # Resolving first means an unknown model fails before any work is done.
            if self.model is not None:
                self.decider = Decider.resolve(self.model, **self._backend_options)
            self._cache = current_cache()
        except BaseException as error:
            self._close_run("failed", error)
            raise
        self._budget = Budget.start(self.timeout, what=f"{self.tool} with {self.model or 'no model'}")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, error: BaseException | None, _: object) -> None:
        if isinstance(error, DecisionTimeoutError) and error.asked is None:
            # The same timeout, saying how much of the call's work was done when it struck.
            counted = DecisionTimeoutError(
                error.timeout, what=error.what, finished=self._answered, asked=self._decisions
            )
            self._close_run("failed", counted)
            raise counted from error
        if error is None:
            self._close_run("success", None)
        elif isinstance(error, anyio.get_cancelled_exc_class() | KeyboardInterrupt):
            self._close_run("cancelled", error)
        else:
            self._close_run("failed", error)

    def _close_run(self, status: str, error: BaseException | None) -> None:
        if self._span is not None:
            self._span.end(status, error, usage=self.usage, models=", ".join(self._answered_by) or None)
        if self._runlog is None:
            return
        self._runlog.finish_run(
            self.run_id,
            status=status,
            models=", ".join(self._answered_by) or None,
            outputs=self._outputs,
            error=None if error is None or status == "cancelled" else error_record(error),
            usage=self.usage.to_dict(),
            ended=time.time(),
            duration=time.perf_counter() - self._clock,
        )

    @property
    def answered_by(self) -> str:
        """The models that answered, in first-answer order (several after a failover)."""
        return ", ".join(self._answered_by) or (self.decider.model_names[0] if self.decider else self.model or "")

    def record_outputs(self, outputs: Any) -> None:
        """What the tool returns, kept (shortened) in the run log."""
        self._outputs = summarize(outputs)

    async def ask(self, request: DecisionRequest) -> DecisionResponse:
        """One decision under the call's budget."""
        assert self.decider is not None, "ToolCall is used as an async context manager"
        self._decisions += 1
        decision = self._decisions
        response = await self.decider.decide(
            request,
            budget=self._budget,
            on_attempt=lambda attempt: self._record_attempt(decision, attempt),
            cache=self._cache,
        )
        self._answered += 1
        if response.model not in self._answered_by:
            self._answered_by.append(response.model)
        return response

    async def ask_all(
        self, requests: Sequence[DecisionRequest], *, concurrency: int | None = None
    ) -> list[DecisionResponse]:
        """Several decisions at once under the one budget, at most ``concurrency`` in flight (None: all);
        any failure fails them all."""
        jobs = [lambda request=request: self.ask(request) for request in requests]
        return await gather(jobs, concurrency=concurrency)

    def _record_attempt(self, decision: int, attempt: Attempt) -> None:
        self.usage = self.usage + attempt.usage
        observer = current_observer()
        if observer is not None:
            observer.model_call(self.tool, attempt, cache_on=self._cache is not None)
        if self._span is not None:
            self._span.model_call(decision, attempt)
        if self._runlog is None:
            return
        self._runlog.record_model_call(
            parent_id=self.run_id,
            tool=self.tool,
            role=str(self.model),
            model=attempt.model,
            provider=attempt.provider,
            status=attempt.status,
            decision=decision,
            attempt=attempt.number,
            cached=attempt.cached,
            request=request_to_data(attempt.request),
            answers=answers_to_data(attempt.response.answers) if attempt.response is not None else None,
            error=error_record(attempt.error) if attempt.error is not None else None,
            usage=attempt.usage.to_dict(),
            started=attempt.started,
            duration=attempt.duration,
        )
