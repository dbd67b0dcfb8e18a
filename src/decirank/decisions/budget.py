"""One time budget for a whole tool call, shared by every model call it makes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import anyio

from ..errors import DecisionTimeoutError

__all__ = ["Budget"]


@dataclass(frozen=True)
class Budget:
    #: The seconds the caller gave; None for no budget.
    seconds: float | None
    #: When it runs out, on anyio's clock (``math.inf`` for never).
    deadline: float
    #: What the budget is for, as the timeout error names it.
    what: str = "decision"

    @classmethod
    def start(cls, seconds: float | None, *, what: str = "decision") -> Budget:
        """A budget of ``seconds`` from now (must be called inside an event loop)."""
        deadline = math.inf if seconds is None else anyio.current_time() + seconds
        return cls(seconds, deadline, what)

    @classmethod
    def unlimited(cls) -> Budget:
        return cls(None, math.inf)

    def remaining(self) -> float:
        return self.deadline - anyio.current_time() if self.seconds is not None else math.inf

    def expired(self) -> DecisionTimeoutError:
        return DecisionTimeoutError(self.seconds or 0.0, what=self.what)
