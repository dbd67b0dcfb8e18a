"""Test helpers shipped for users: a scripted decision model.

:class:`ScriptedBackend` answers from a function you give it, records every
request, and can be slowed down or made to fail, so a pipeline built on
decirank can be tested without a model. Register it under a name with
:func:`use_backend`::

    backend = ScriptedBackend(answer=lambda request: {...})
    with use_backend(backend):
        decirank.rank(items, "...", state, model="scripted")
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping

import anyio

from .backends import _providers, register_provider
from .backends.base import Backend
from .types.answers import Answer, ChoiceAnswer, DecisionResponse, LikelihoodAnswer, ScoreAnswer, Usage
from .types.limits import ModelLimits
from .types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion

__all__ = ["ScriptedBackend", "uniform_answers", "use_backend"]

AnswerFunction = Callable[[DecisionRequest], Mapping[str, Answer]]


def uniform_answers(request: DecisionRequest) -> dict[str, Answer]:
    """Every likelihood 0.5, every distribution uniform: answers that favour nothing."""
    answers: dict[str, Answer] = {}
    for qid, question in request.questions.items():
        if isinstance(question, LikelihoodQuestion):
            answers[qid] = LikelihoodAnswer(0.5)
        elif isinstance(question, ChoiceQuestion):
            answers[qid] = ChoiceAnswer({key: 1.0 / len(question.options) for key in question.options})
        else:
            answers[qid] = ScoreAnswer(tuple(1.0 / len(question.levels) for _ in question.levels))
    return answers


class ScriptedBackend(Backend):
    """A model that answers with ``answer``, after ``delay`` seconds, or raises ``error``; keeps every request."""

    provider = "scripted"

    def __init__(
        self,
        model: str = "default",
        *,
        answer: AnswerFunction = uniform_answers,
        delay: float = 0.0,
        error: Exception | None = None,
        limits: ModelLimits | None = None,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(model)
        self.answer = answer
        self.delay = delay
        self.error = error
        self._limits = limits or ModelLimits()
        self.usage = usage or Usage(input_tokens=10, output_tokens=1, cost=0.0, calls=1)
        self.requests: list[DecisionRequest] = []

    @property
    def limits(self) -> ModelLimits:
        return self._limits

    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        self.requests.append(request)
        if self.delay:
            await anyio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return DecisionResponse(self.name, dict(self.answer(request)), self.usage)


@contextlib.contextmanager
def use_backend(backend: Backend, provider: str | None = None) -> Iterator[str]:
    """Register ``backend`` as provider ``provider`` (default: its own) and yield its model name."""
    name = provider or backend.provider
    previous = _providers.get(name)
    register_provider(name, lambda model, **_: backend, default_model=backend.model, description="test backend", open_models=True)
    try:
        yield f"{name}:{backend.model}"
    finally:
        if previous is not None:
            _providers[name] = previous
        else:
            _providers.pop(name, None)
