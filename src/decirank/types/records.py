"""Requests and answers as plain JSON data, for the run log and the decision cache.

These are decirank's own records, not a wire format: each backend speaks its
service's format in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidAnswerError
from .answers import Answer, ChoiceAnswer, LikelihoodAnswer, ScoreAnswer
from .questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, Question, ScoreQuestion

__all__ = ["answers_from_data", "answers_to_data", "question_to_data", "request_to_data"]


def question_to_data(question: Question) -> dict[str, Any]:
    data: dict[str, Any] = {"type": question.kind, "instructions": question.instructions}
    if isinstance(question, LikelihoodQuestion):
        if question.true is not None:
            data["true"] = question.true
        if question.false is not None:
            data["false"] = question.false
    elif isinstance(question, ChoiceQuestion):
        data["options"] = dict(question.options)
    elif isinstance(question, ScoreQuestion):
        data["levels"] = list(question.levels)
    if getattr(question, "examples", ()):
        data["examples"] = [example.to_dict() for example in question.examples]
    return data


def request_to_data(request: DecisionRequest) -> dict[str, Any]:
    return {
        "state": request.state,
        "questions": {qid: question_to_data(question) for qid, question in request.questions.items()},
    }


def answers_to_data(answers: Mapping[str, Answer]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for qid, answer in answers.items():
        if isinstance(answer, LikelihoodAnswer):
            data[qid] = {"type": answer.kind, "probability": answer.probability}
        elif isinstance(answer, ChoiceAnswer):
            data[qid] = {"type": answer.kind, "probabilities": dict(answer.probabilities)}
        else:
            data[qid] = {"type": answer.kind, "probabilities": list(answer.probabilities)}
    return data


def answers_from_data(data: Any) -> dict[str, Answer]:
    """The inverse of :func:`answers_to_data`; raises :class:`InvalidAnswerError` on data it did not write."""
    if not isinstance(data, Mapping):
        raise InvalidAnswerError(f"recorded answers are not a mapping of question id to answer: {data!r}")
    answers: dict[str, Answer] = {}
    for qid, answer in data.items():
        try:
            answers[qid] = _answer_from_data(answer)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise InvalidAnswerError(f"answer {qid!r} is not a recorded answer: {answer!r}") from error
    return answers


def _answer_from_data(answer: Any) -> Answer:
    kind = answer.get("type") if isinstance(answer, Mapping) else None
    if kind == LikelihoodAnswer.kind:
        return LikelihoodAnswer(float(answer["probability"]))
    if kind == ChoiceAnswer.kind:
        return ChoiceAnswer({str(key): float(p) for key, p in answer["probabilities"].items()})
    if kind == ScoreAnswer.kind:
        return ScoreAnswer(tuple(float(p) for p in answer["probabilities"]))
    raise ValueError(f"unknown answer type {kind!r}")
