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
    "Example",
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


MAX_EXAMPLES = 10_000


@dataclass(frozen=True)
class Example:
    """A labelled example for a question: what the model judges, and the right answer.

    ``state`` is the text (or JSON value) the question is asked about: the state,
    or for a question that names its own subject (the filter tool's item) that
    subject. ``answer`` is ``True``/``False`` for a likelihood question and an
    option key for a choice question.
    """

    state: Any
    answer: bool | str

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "answer": self.answer}


def _check_examples(examples: Any, allowed: Any, expected: str) -> tuple[Example, ...]:
    """Examples as a tuple of :class:`Example`; plain ``{"state", "answer"}`` mappings are accepted too."""
    if examples is None:
        return ()
    if isinstance(examples, str | bytes | Mapping) or not hasattr(examples, "__iter__"):
        raise InvalidInputError("question.examples", 'a list of {"state": ..., "answer": ...}', got=examples)
    checked: list[Example] = []
    for i, example in enumerate(examples):
        if isinstance(example, Mapping):
            if set(example) != {"state", "answer"}:
                raise InvalidInputError(
                    f"question.examples.{i}", 'an object with exactly "state" and "answer"', got=sorted(example)
                )
            example = Example(example["state"], example["answer"])
        if not isinstance(example, Example):
            raise InvalidInputError(f"question.examples.{i}", 'an Example or {"state", "answer"}', got=example)
        if not allowed(example.answer):
            raise InvalidInputError(f"question.examples.{i}.answer", expected, got=example.answer)
        checked.append(example)
    if len(checked) > MAX_EXAMPLES:
        raise InvalidInputError("question.examples", f"at most {MAX_EXAMPLES} examples", got=len(checked))
    return tuple(checked)


@dataclass(frozen=True)
class LikelihoodQuestion:
    """How likely is ``instructions`` true of the state? Answered by a probability.

    ``true`` and ``false`` optionally say what each outcome means. ``examples``
    are labelled states (answer ``True`` or ``False``) a model may learn from.
    """

    instructions: str
    true: str | None = None
    false: str | None = None
    examples: tuple[Example, ...] = ()

    kind: ClassVar[str] = "likelihood"

    def __post_init__(self) -> None:
        _require_text(self.instructions, "question.instructions")
        for name in ("true", "false"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(f"question.{name}", "a string description or null", got=value)
        examples = _check_examples(self.examples, lambda answer: isinstance(answer, bool), "true or false")
        object.__setattr__(self, "examples", examples)


@dataclass(frozen=True)
class ChoiceQuestion:
    """Which option fits best? ``options`` maps a key to its description.

    The mapping's order is the order the options are shown in; keys are
    strings, and servers may sort them, so callers that care about order
    choose keys that sort the same way.
    """

    instructions: str
    options: Mapping[str, str]
    #: Labelled states whose answer is an option key, for a model that can learn from them.
    examples: tuple[Example, ...] = ()

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
        examples = _check_examples(
            self.examples, lambda answer: isinstance(answer, str) and answer in self.options, "one of the option keys"
        )
        object.__setattr__(self, "examples", examples)


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
