"""One tool invocation: its decider, its single time budget, and its usage.

Every tool opens a :class:`ToolCall` and asks its questions through it, so the
budget, the concurrency of split work, cancellation and usage accounting are
written once, here, for every tool.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio

from ..errors import DecisionTimeoutError, InvalidInputError
from .answers import DecisionResponse, Usage
from .decider import DEFAULT_ROLE, Decider
from .questions import DecisionRequest

__all__ = ["ToolCall", "gather"]

T = TypeVar("T")


async def gather(jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``jobs`` concurrently; the first failure cancels the rest and is raised as is."""
    results: list[Any] = [None] * len(jobs)
    failure: BaseException | None = None

    async with anyio.create_task_group() as group:

        async def run(index: int, job: Callable[[], Awaitable[T]]) -> None:
            nonlocal failure
            try:
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
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0 or math.isnan(timeout):
        raise InvalidInputError("timeout", "a number of seconds greater than 0", got=timeout)
    return float(timeout)


class ToolCall:
    """Use as ``async with ToolCall("rank", model=...) as call: await call.ask(request)``."""

    def __init__(
        self,
        tool: str,
        *,
        model: str = DEFAULT_ROLE,
        timeout: float | None = None,
        backend_options: dict[str, Any] | None = None,
    ) -> None:
        self.tool = tool
        self.model = model
        self.timeout = check_timeout(timeout)
        self.run_id = uuid.uuid4().hex
        self.usage = Usage()
        self._backend_options = backend_options or {}
        self._answered_by: list[str] = []
        self._deadline: float | None = None
        self.decider: Decider | None = None

    async def __aenter__(self) -> ToolCall:
        # Resolving first means an unknown model fails before any work is done.
        self.decider = Decider.resolve(self.model, **self._backend_options)
        if self.timeout is not None:
            self._deadline = anyio.current_time() + self.timeout
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    @property
    def answered_by(self) -> str:
        """The models that answered, in first-answer order (several after a failover)."""
        return ", ".join(self._answered_by) or (self.decider.model_names[0] if self.decider else self.model)

    async def ask(self, request: DecisionRequest) -> DecisionResponse:
        """One decision under the call's budget."""
        assert self.decider is not None, "ToolCall is used as an async context manager"
        with anyio.CancelScope(deadline=self._deadline if self._deadline is not None else math.inf) as scope:
            response = await self.decider.decide(request)
        if scope.cancelled_caught:
            raise DecisionTimeoutError(self.timeout or 0.0, what=f"{self.tool} with {self.model}")
        self.usage = self.usage + response.usage
        if response.model not in self._answered_by:
            self._answered_by.append(response.model)
        return response

    async def ask_all(self, requests: Sequence[DecisionRequest]) -> list[DecisionResponse]:
        """Several decisions at once under the one budget; any failure fails them all."""
        return await gather([lambda request=request: self.ask(request) for request in requests])
