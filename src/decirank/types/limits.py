"""What a model declares it can take in one call.

A request over a model's limits is never sent to it: tools split their work
to fit (:meth:`ModelLimits.combine` gives the limits a whole role can take),
and failover skips a model whose limits a request exceeds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import LimitExceededError
from .questions import ChoiceQuestion, DecisionRequest, ScoreQuestion

__all__ = ["ModelLimits"]


@dataclass(frozen=True)
class ModelLimits:
    #: Options one choice question may carry (255 typical, 208 on some hosts).
    max_options: int = 255
    #: Questions one call may carry; None when the model declares no limit.
    max_questions: int | None = None
    #: Levels one score question may carry.
    max_levels: int = 10
    #: Tokens of context one call may fill; None when unknown.
    context_tokens: int | None = None

    @staticmethod
    def combine(limits: Iterable[ModelLimits]) -> ModelLimits:
        """The tightest limits of several models: a request that fits them fits every one."""
        limits = list(limits)
        if not limits:
            return ModelLimits()
        declared_questions = [lim.max_questions for lim in limits if lim.max_questions is not None]
        declared_context = [lim.context_tokens for lim in limits if lim.context_tokens is not None]
        return ModelLimits(
            max_options=min(lim.max_options for lim in limits),
            max_questions=min(declared_questions) if declared_questions else None,
            max_levels=min(lim.max_levels for lim in limits),
            context_tokens=min(declared_context) if declared_context else None,
        )

    def check(self, request: DecisionRequest, *, model: str) -> None:
        """Raise :class:`LimitExceededError` if ``request`` is over these limits."""
        if self.max_questions is not None and len(request.questions) > self.max_questions:
            raise LimitExceededError(
                f"{len(request.questions)} questions in one call, over the limit of {self.max_questions}",
                model=model,
            )
        for qid, question in request.questions.items():
            if isinstance(question, ChoiceQuestion) and len(question.options) > self.max_options:
                raise LimitExceededError(
                    f"question {qid!r} has {len(question.options)} options, over the limit of {self.max_options}",
                    model=model,
                )
            if isinstance(question, ScoreQuestion) and len(question.levels) > self.max_levels:
                raise LimitExceededError(
                    f"question {qid!r} has {len(question.levels)} levels, over the limit of {self.max_levels}",
                    model=model,
                )
