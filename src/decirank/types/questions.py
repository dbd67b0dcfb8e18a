"""Typed decision questions and the request that carries them.

A decision model answers three kinds of question about a *state*:

- :class:`LikelihoodQuestion`: how likely is a statement true (System One ``noul``,
  OpenAI ``predicate``)?
- :class:`ChoiceQuestion`: which of 2..255 options fits best (``choice``)?
- :class:`ScoreQuestion`: which of 2..10 ordered levels applies (``score``)?

Question ids are never shown to a model, so each question carries its own text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from ..errors import InvalidInputError

__all__ = [
    "ChoiceQuestion",
    "DecisionRequest",
    "LikelihoodQuestion",
    "Question",
    "ScoreQuestion",
]

MIN_OPTIONS = 2
MAX_OPTIONS = 255
MIN_LEVELS = 2
MAX_LEVELS = 10


def _require_text(value: Any, field_name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field_name, "a non-empty string", got=value)


@dataclass(frozen=True)
class LikelihoodQuestion:
    """How likely is ``instructions`` true of the state? Answered by a probability.

    ``true`` and ``false`` optionally say what each outcome means.
    """

    instructions: str
    true: str | None = None
    false: str | None = None

    kind: ClassVar[str] = "likelihood"

    def __post_init__(self) -> None:
        _require_text(self.instructions, "question.instructions")


@dataclass(frozen=True)
class ChoiceQuestion:
    """Which option fits best? ``options`` maps a key to its description.

    The mapping's order is the order the options are shown in; keys are
    strings, and servers may sort them, so callers that care about order
    choose keys that sort the same way.
    """

    instructions: str
    options: Mapping[str, str]

    kind: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        _require_text(self.instructions, "question.instructions")
        if not isinstance(self.options, Mapping):
            raise InvalidInputError("question.options", "a mapping of key to description", got=self.options)
        if not MIN_OPTIONS <= len(self.options) <= MAX_OPTIONS:
            raise InvalidInputError(
                "question.options", f"{MIN_OPTIONS} to {MAX_OPTIONS} options", got=len(self.options)
            )
        for key, description in self.options.items():
            if not isinstance(key, str) or not key:
                raise InvalidInputError("question.options", "non-empty string keys", got=key)
            if not isinstance(description, str):
                raise InvalidInputError(f"question.options.{key}", "a string description", got=description)
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))


@dataclass(frozen=True)
class ScoreQuestion:
    """Which of the ordered ``levels`` (lowest first) applies?"""

    instructions: str
    levels: tuple[str, ...]

    kind: ClassVar[str] = "score"

    def __post_init__(self) -> None:
        _require_text(self.instructions, "question.instructions")
        levels = tuple(self.levels)
        if not MIN_LEVELS <= len(levels) <= MAX_LEVELS:
            raise InvalidInputError("question.levels", f"{MIN_LEVELS} to {MAX_LEVELS} levels", got=len(levels))
        for level in levels:
            _require_text(level, "question.levels")
        object.__setattr__(self, "levels", levels)


Question = LikelihoodQuestion | ChoiceQuestion | ScoreQuestion


@dataclass(frozen=True)
class DecisionRequest:
    """One call to a decision model: a state and the questions asked about it."""

    state: Any
    questions: Mapping[str, Question] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.questions:
            raise InvalidInputError("questions", "at least one question")
        for key, question in self.questions.items():
            if not isinstance(key, str) or not key:
                raise InvalidInputError("questions", "non-empty string ids", got=key)
            if not isinstance(question, LikelihoodQuestion | ChoiceQuestion | ScoreQuestion):
                raise InvalidInputError(f"questions.{key}", "a decision question", got=question)
        object.__setattr__(self, "questions", MappingProxyType(dict(self.questions)))
