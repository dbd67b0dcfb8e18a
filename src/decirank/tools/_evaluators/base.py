"""What every evaluator returns, and the one thing every evaluator does."""

from __future__ import annotations

import abc
import copy
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

import anyio

from ...decisions.toolcall import ToolCall

__all__ = ["BoundedEvaluator", "Evaluation", "Evaluator", "Verdict", "strip_code_fence"]


class Verdict(StrEnum):
    VALID = "VALID"
    PARTIAL = "PARTIAL"
    INVALID = "INVALID"
    #: The ref could not be evaluated at all (missing, empty, the command could not start).
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Evaluation:
    """One artifact's score in [0, 1] (None when it could not be had) and why."""

    score: float | None
    verdict: Verdict
    issues: tuple[str, ...] = ()
    reason: str = ""


class Evaluator(abc.ABC):
    """A parsed ``exec:``, ``score:`` or ``validate:`` directive."""

    #: Whether it asks a decision model; score_list then opens a ToolCall for it.
    needs_model: ClassVar[bool]

    def __init__(self, spec: str) -> None:
        #: The directive as the caller wrote it.
        self.spec = spec

    def within(self, budget: float | None) -> Evaluator:
        """This evaluator, bounded by a tool call's budget of ``budget`` seconds from now.

        Model calls are bounded by the ToolCall already, so most evaluators are themselves;
        one that does work of its own (``exec:``) overrides this.
        """
        return self

    @abc.abstractmethod
    async def evaluate(self, text: str, call: ToolCall | None) -> Evaluation:
        """Score one artifact's text; ``call`` is the open ToolCall when ``needs_model``."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec!r}>"


# An outer fence: ``` or ~~~ (three or more), an optional info string, the body,
# and the same fence closing the text. Only the outermost one is removed.
_OUTER_FENCE = re.compile(r"\A\s*(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)\n?(?P=fence)\s*\Z", re.DOTALL)


class BoundedEvaluator(Evaluator):
    """An evaluator that does work of its own (a command, a parse), which a tool call's budget bounds.

    ``deadline`` is when that budget ends, on anyio's clock; ``budget`` its seconds, for the
    reason of work it stopped. Subclasses set both in their constructor.
    """

    deadline: float = math.inf
    budget: float | None = None

    def within(self, budget: float | None) -> BoundedEvaluator:
        """A copy of this evaluator whose work ends when a budget of ``budget`` seconds from now does
        (None: no budget). Must be called in the event loop, when the tool call's budget starts."""
        if budget is None or math.isinf(budget):
            return self
        bounded = copy.copy(self)
        bounded.deadline = min(self.deadline, anyio.current_time() + budget)
        bounded.budget = budget
        return bounded


def strip_code_fence(text: str) -> tuple[str, str | None]:
    """The text inside an outer code fence, and the fence's language; the text itself when unfenced.

    Generated artifacts often arrive wrapped in a Markdown fence that no
    parser or command expects.
    """
    match = _OUTER_FENCE.match(text)
    if match is None:
        return text, None
    body = match["body"]
    if body and not body.endswith("\n"):
        body += "\n"
    language = match["info"].strip().split(" ")[0].lower() or None
    return body, language
