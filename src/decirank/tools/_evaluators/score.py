"""``score:<criterion>``: a decision model grades the artifact on an ad-hoc criterion.

One score question over five graded levels, asked with the artifact as the
state; the expected level, scaled to [0, 1], is the score. VALID from 0.95,
PARTIAL above 0, INVALID at 0.
"""

from __future__ import annotations

from ...decisions.toolcall import ToolCall
from ...types.questions import DecisionRequest, ScoreQuestion
from .base import Evaluation, Evaluator, Verdict

__all__ = ["LEVELS", "VALID_SCORE", "CriterionScorer"]

#: Lowest first. Each level says how much of the criterion is met, so any
#: criterion reads the same way against them.
LEVELS = (
    "does not meet the criterion at all",
    "meets a small part of the criterion",
    "meets about half of the criterion",
    "meets most of the criterion, with minor gaps",
    "fully meets the criterion",
)
VALID_SCORE = 0.95


def criterion_question(criterion: str) -> ScoreQuestion:
    return ScoreQuestion(f"How well does the artifact meet this criterion: {criterion}", LEVELS)


class CriterionScorer(Evaluator):
    needs_model = True

    def __init__(self, spec: str, criterion: str) -> None:
        super().__init__(spec)
        self.criterion = criterion
        self.question = criterion_question(criterion)

    async def evaluate(self, text: str, call: ToolCall | None) -> Evaluation:
        assert call is not None, "score_list opens a ToolCall for evaluators that need a model"
        response = await call.ask(DecisionRequest(state=text, questions={"criterion": self.question}))
        answer = response.answers["criterion"]
        score = answer.normalized_score
        nearest = LEVELS[round(answer.score)]
        reason = f"expected level {answer.score:.2f} of {len(LEVELS) - 1}, nearest: {nearest}"
        if score >= VALID_SCORE:
            return Evaluation(score, Verdict.VALID, (), reason)
        issue = f"{nearest}: {self.criterion}"
        return Evaluation(score, Verdict.PARTIAL if score > 0 else Verdict.INVALID, (issue,), reason)
