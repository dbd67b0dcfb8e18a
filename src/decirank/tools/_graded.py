"""score's graded path (``levels``) and how a "How <adjective> is ...?" question is read without levels.

A question such as "How urgent is this ticket?" asks for a degree, not a yes
or no. Given ``levels`` (lowest first), each text is the state of one
:class:`~decirank.types.questions.ScoreQuestion` and its answer is a
distribution over the levels: the most likely ``level``, the
``expected_level`` (0 for the first level, ``len(levels) - 1`` for the last)
and every level's probability. Asked without levels, the same question is
read as the yes/no question it implies ("Is this ticket urgent?"), whose
probability is what a yes/no question's means.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ..errors import InvalidInputError
from ..types.answers import ScoreAnswer
from ..types.questions import MAX_LEVELS, MIN_LEVELS

__all__ = ["LevelDecision", "LevelDecisionOut", "check_levels", "yes_no_reading"]

#: "How <adjective> is|are|was|were <subject>?": a degree asked of a subject.
_DEGREE = re.compile(r"^\s*how\s+(?P<adjective>[a-z-]+)\s+(?P<verb>is|are|was|were)\s+(?P<subject>.+?)\s*\?\s*$", re.I)
#: Adjectives after "how" that ask for a number or a manner, not a degree a yes/no can carry.
_NOT_DEGREES = frozenset({"many", "much", "often", "come", "do", "does", "did", "can", "could", "should", "would"})


def yes_no_reading(question: str) -> str:
    """The yes/no question a degree question implies, or ``question`` as it is.

    >>> yes_no_reading("How urgent is this ticket?")
    'Is this ticket urgent?'
    >>> yes_no_reading("How likely is it that the customer leaves?")
    'Is it likely that the customer leaves?'
    >>> yes_no_reading("Is this review positive?")
    'Is this review positive?'
    """
    found = _DEGREE.match(question)
    if found is None or found["adjective"].lower() in _NOT_DEGREES:
        return question
    adjective, verb, subject = found["adjective"].lower(), found["verb"].capitalize(), found["subject"]
    if subject.lower().startswith("it "):  # "How likely is it that ...?": the adjective follows "it"
        return f"{verb} it {adjective} {subject[3:]}?"
    return f"{verb} {subject} {adjective}?"


def check_levels(levels: Any) -> tuple[str, ...] | None:
    """``levels`` as a tuple of distinct non-blank texts, lowest first, or None; the error names the field."""
    if levels is None:
        return None
    expected = f"a list of {MIN_LEVELS} to {MAX_LEVELS} level names, lowest first"
    if isinstance(levels, str | bytes) or not isinstance(levels, Sequence):
        raise InvalidInputError("levels", expected, got=levels)
    if not MIN_LEVELS <= len(levels) <= MAX_LEVELS:
        raise InvalidInputError("levels", expected, got=levels)
    for index, level in enumerate(levels):
        if not isinstance(level, str) or not level.strip():
            raise InvalidInputError(f"levels.{index}", "a non-blank level name", got=level)
    if len(set(levels)) != len(levels):
        raise InvalidInputError("levels", "distinct level names", got=levels)
    return tuple(levels)


@dataclass(frozen=True)
class LevelDecision:
    """One text's graded answer."""

    #: The text's position in the input.
    index: int
    #: The most likely level.
    level: str
    #: The expected level: 0 for the first level, ``len(levels) - 1`` for the last.
    expected_level: float
    #: Each level's probability, lowest level first.
    probabilities: dict[str, float]

    @classmethod
    def of(cls, index: int, answer: ScoreAnswer, levels: Sequence[str]) -> LevelDecision:
        probabilities = {level: float(p) for level, p in zip(levels, answer.probabilities, strict=True)}
        best = max(range(len(levels)), key=lambda i: (answer.probabilities[i], -i))
        return cls(index, levels[best], float(answer.score), probabilities)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "level": self.level,
            "expected_level": self.expected_level,
            "probabilities": dict(self.probabilities),
        }


class LevelDecisionOut(BaseModel):
    index: int = Field(description="The text's position in the input.")
    level: str = Field(description="The most likely level.")
    expected_level: float = Field(description="The expected level: 0 for the first level, n - 1 for the last.")
    probabilities: dict[str, float] = Field(description="Each level's probability, lowest level first.")
