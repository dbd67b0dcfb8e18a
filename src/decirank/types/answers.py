"""Typed answers, usage, and the check that a response answers its request.

Probabilities from hosted services are rounded (often to 2 decimals), so
answers tie; every consumer sorts stably.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import InvalidAnswerError
from .questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion

__all__ = [
    "Answer",
    "ChoiceAnswer",
    "DecisionResponse",
    "LikelihoodAnswer",
    "Note",
    "ScoreAnswer",
    "Usage",
    "check_response",
]

# Services round to 2 decimals and sum the rounded figures, so a distribution may
# miss 1.0 by a few hundredths; anything further off is not a distribution.
_DISTRIBUTION_SLACK = 0.06


def _confidence(top: float, n: int) -> float:
    """How far the top probability stands above a uniform guess: (n*top-1)/(n-1)."""
    return max(0.0, min(1.0, (n * top - 1.0) / (n - 1)))


@dataclass(frozen=True)
class LikelihoodAnswer:
    probability: float

    kind = "likelihood"


@dataclass(frozen=True)
class ChoiceAnswer:
    """A distribution over the question's option keys."""

    probabilities: Mapping[str, float]

    kind = "choice"

    def __post_init__(self) -> None:
        object.__setattr__(self, "probabilities", MappingProxyType(dict(self.probabilities)))

    @property
    def choice(self) -> str:
        """The most probable key; on a tie, the one the answer lists first."""
        return max(self.probabilities, key=self.probabilities.__getitem__)

    @property
    def confidence(self) -> float:
        return _confidence(self.probabilities[self.choice], len(self.probabilities))


@dataclass(frozen=True)
class ScoreAnswer:
    """A distribution over the question's levels, lowest level first."""

    probabilities: tuple[float, ...]

    kind = "score"

    def __post_init__(self) -> None:
        object.__setattr__(self, "probabilities", tuple(self.probabilities))

    @property
    def score(self) -> float:
        """The expected level, from 0 to ``len(levels) - 1``."""
        return sum(level * p for level, p in enumerate(self.probabilities)) / (sum(self.probabilities) or 1.0)

    @property
    def normalized_score(self) -> float:
        """The expected level scaled to [0, 1]."""
        return self.score / (len(self.probabilities) - 1)

    @property
    def confidence(self) -> float:
        return _confidence(max(self.probabilities), len(self.probabilities))


Answer = LikelihoodAnswer | ChoiceAnswer | ScoreAnswer


@dataclass(frozen=True)
class Usage:
    """What one or more model calls consumed. ``cost`` is None when nobody knows it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None
    currency: str = "USD"
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        if self.cost is None and other.cost is None:
            cost = None
        else:
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost=cost,
            # A sum that starts from no cost takes the currency of the first cost added.
            currency=self.currency if self.cost is not None else other.currency,
            calls=self.calls + other.calls,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost": self.cost,
            "currency": self.currency,
            "calls": self.calls,
        }


@dataclass(frozen=True)
class Note:
    """Something a model says about how it read a question's text, beside its answer (never an error).

    ``kind`` is ``"cut"`` (the text was longer than the model reads; its end was not read) or
    ``"non_english"`` (the text does not look English, and the model reads English only).
    ``about`` is ``"text"`` (what the question judges) or ``"state"`` (the query it is judged against).
    """

    kind: str
    message: str
    about: str = "text"

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class DecisionResponse:
    """A model's answers to one :class:`DecisionRequest`."""

    model: str
    answers: Mapping[str, Answer]
    usage: Usage = field(default_factory=Usage)
    request_id: str | None = None
    #: True when the answers came from the decision cache, not from the model.
    cached: bool = False
    #: Notes on how the model read each question's text, by question id (only where there is one).
    notes: Mapping[str, tuple[Note, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", MappingProxyType(dict(self.answers)))
        object.__setattr__(self, "notes", MappingProxyType({qid: tuple(n) for qid, n in self.notes.items()}))


def _check_probability(value: Any, where: str) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InvalidAnswerError(f"{where}: probability is not a finite number ({value!r})")
    if not 0.0 <= value <= 1.0:
        raise InvalidAnswerError(f"{where}: probability {value!r} is outside [0, 1]")


def _check_distribution(values: list[Any], where: str) -> None:
    for value in values:
        _check_probability(value, where)
    total = sum(values)
    if abs(total - 1.0) > _DISTRIBUTION_SLACK:
        raise InvalidAnswerError(f"{where}: probabilities sum to {total:.3f}, not 1")


def check_response(request: DecisionRequest, response: DecisionResponse) -> None:
    """Raise :class:`InvalidAnswerError` unless every question has a well-formed answer.

    This is the gate that keeps invented or broken scores out of every tool.
    """
    for qid, question in request.questions.items():
        answer = response.answers.get(qid)
        where = f"{response.model}: answer {qid!r}"
        if answer is None:
            raise InvalidAnswerError(f"{where} is missing")
        if isinstance(question, LikelihoodQuestion):
            if not isinstance(answer, LikelihoodAnswer):
                raise InvalidAnswerError(f"{where} is a {answer.kind} answer to a likelihood question")
            _check_probability(answer.probability, where)
        elif isinstance(question, ChoiceQuestion):
            if not isinstance(answer, ChoiceAnswer):
                raise InvalidAnswerError(f"{where} is a {answer.kind} answer to a choice question")
            if set(answer.probabilities) != set(question.options):
                raise InvalidAnswerError(f"{where} does not give a probability for exactly the options asked")
            _check_distribution(list(answer.probabilities.values()), where)
        elif isinstance(question, ScoreQuestion):
            if not isinstance(answer, ScoreAnswer):
                raise InvalidAnswerError(f"{where} is a {answer.kind} answer to a score question")
            if len(answer.probabilities) != len(question.levels):
                raise InvalidAnswerError(f"{where} has {len(answer.probabilities)} levels, not {len(question.levels)}")
            _check_distribution(list(answer.probabilities), where)
