"""The one thing a backend must do: answer a :class:`DecisionRequest`.

A backend knows nothing of tools, roles, failover or the run log. It turns a
request into its model's input, returns typed answers with usage, and raises
the typed errors of :mod:`decirank.errors` when the model fails.

Two readings shared by the backends that run in this process (``local`` and
``lexical``): a state as plain words, and a likelihood as a score answer.
"""

from __future__ import annotations

import abc
import json
import math
from typing import Any, ClassVar

from ..types.answers import DecisionResponse
from ..types.limits import ModelLimits
from ..types.questions import DecisionRequest

__all__ = ["Backend", "binomial_levels", "render_state"]


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

    def question_about(self, question: str, text: str) -> str | None:
        """A question that carries ``text`` inside it and that this model reads exactly as ``question``
        asked with ``text`` as the state, or None when it has no such reading.

        Where a model has one, a tool may ask many texts' questions in one call about an empty
        state instead of one call per text (score does, on the embedded model). The default is
        None: a wire format's model is asked as it is asked, one state per request.
        """
        return None

    async def aclose(self) -> None:
        """Release connections or other resources; the default holds none."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def render_state(state: Any) -> str:
    """The words of a state: strings as they are, containers as their values, one per line.

    Keys label values ("question", "context"); as words they would only add noise. The walk is
    iterative, so no nesting makes it fail.
    """
    lines: list[str] = []
    stack = [state]
    while stack:
        value = stack.pop()
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            if value:
                lines.append(value)
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list | tuple):
            stack.extend(reversed(value))
        elif isinstance(value, int | float):
            lines.append(str(value))
        else:
            lines.append(json.dumps(value, sort_keys=True, default=str))
    return "\n".join(lines)


def binomial_levels(levels: int, p: float) -> tuple[float, ...]:
    """A score answer's distribution read from a likelihood ``p``: the binomial whose mean is ``p`` of the way up.

    It keeps the levels ordered and unimodal, and the expected level at ``p``
    (``normalized_score == p``), for a model that can judge a subject but
    cannot read what each level's label means.
    """
    n = levels - 1
    return tuple(math.comb(n, k) * p**k * (1.0 - p) ** (n - k) for k in range(levels))
