"""The one thing a backend must do: answer a :class:`DecisionRequest`.

A backend knows nothing of tools, roles, failover or the run log. It turns a
request into its model's input, returns typed answers with usage, and raises
the typed errors of :mod:`decirank.errors` when the model fails.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from ..decisions.answers import DecisionResponse
from ..decisions.limits import ModelLimits
from ..decisions.questions import DecisionRequest

__all__ = ["Backend"]


class Backend(abc.ABC):
    """Subclasses must be cheap to construct: load weights or open connections on first use."""

    #: The provider part of ``provider:model`` names, e.g. ``local`` or ``systemone``.
    provider: ClassVar[str]

    def __init__(self, model: str) -> None:
        self.model = model

    @property
    def name(self) -> str:
        """The explicit ``provider:model`` name, as the run log and results show it."""
        return f"{self.provider}:{self.model}"

    @property
    @abc.abstractmethod
    def limits(self) -> ModelLimits:
        """What one call to this model may carry."""

    @abc.abstractmethod
    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        """Answer every question of ``request`` in one model call.

        CPU-bound backends run their work off the event loop so that a
        caller's cancellation is seen at once.
        """

    async def aclose(self) -> None:
        """Release connections or other resources; the default holds none."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
