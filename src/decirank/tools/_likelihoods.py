"""One likelihood question per text, split across concurrent calls (rerank, filter)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..decisions.toolcall import ToolCall, gather
from ..types.answers import DecisionResponse, Note
from ..types.questions import DecisionRequest, Example, LikelihoodQuestion
from ._checks import check_count

__all__ = [
    "DEFAULT_QUESTIONS_PER_CALL",
    "Likelihoods",
    "TextNote",
    "ask_likelihoods",
    "check_per_call",
    "notes_of",
    "questions_per_call",
]

DEFAULT_QUESTIONS_PER_CALL = 20


@dataclass(frozen=True)
class TextNote:
    """A model's note on how it read the input at ``index`` (a long text cut short, a text not in English).

    ``index`` is None for a note on the query or state that every question shares.
    """

    index: int | None
    note: Note

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, **self.note.to_dict()}


def notes_of(responses: Sequence[DecisionResponse], index_of: Callable[[int, str], int]) -> list[TextNote]:
    """The responses' notes, each on the input ``index_of(response position, question id)``, in input order.

    A note on the state is said once, first, however many questions shared that state.
    """
    shared: dict[Note, None] = {}
    notes: list[TextNote] = []
    for position, response in enumerate(responses):
        for qid, noted in response.notes.items():
            for note in noted:
                if note.about == "state":
                    shared[note] = None
                else:
                    notes.append(TextNote(index_of(position, qid), note))
    notes.sort(key=lambda text_note: text_note.index)
    return [TextNote(None, note) for note in shared] + notes


@dataclass(frozen=True)
class Likelihoods:
    """Each text's probability, in order, and the model's notes on how it read them."""

    probabilities: list[float]
    notes: list[TextNote]


def check_per_call(value: Any, field: str) -> int | None:
    """The caller's cap on questions per call, if any; ``field`` is the tool's name for it."""
    return None if value is None else check_count(value, field)


def questions_per_call(call: ToolCall, requested: int | None) -> int:
    """The smallest limit any model of the role declares, else the caller's (checked), else 20."""
    assert call.decider is not None
    declared = call.decider.limits.max_questions
    return declared or requested or DEFAULT_QUESTIONS_PER_CALL


def likelihood_requests(
    state: Any, texts: Sequence[str], per_call: int, examples: Sequence[Example] = ()
) -> list[DecisionRequest]:
    """Question ids are the texts' positions; they are never shown to the model.

    ``examples`` go with every question alike.
    """
    examples = tuple(examples)
    return [
        DecisionRequest(
            state=state,
            questions={
                str(i): LikelihoodQuestion(texts[i], examples=examples)
                for i in range(start, min(start + per_call, len(texts)))
            },
        )
        for start in range(0, len(texts), per_call)
    ]


async def ask_likelihoods(
    call: ToolCall,
    state: Any,
    texts: Sequence[str],
    per_call: int,
    examples: Sequence[Example] = (),
    *,
    on_answered: Callable[[int], None] | None = None,
) -> Likelihoods:
    """The probability of each text, in order, each question carrying ``examples``; any failed call fails them all.

    ``on_answered`` hears how many questions each call answered, as it finishes (a progress bar).
    """
    requests = likelihood_requests(state, texts, per_call, examples)
    if on_answered is None:
        responses = await call.ask_all(requests)
    else:

        async def asked(request: DecisionRequest) -> DecisionResponse:
            response = await call.ask(request)
            on_answered(len(request.questions))
            return response

        responses = await gather([lambda request=request: asked(request) for request in requests])
    # Every question has a checked answer (check_response), so every slot gets filled.
    probabilities: dict[int, float] = {}
    for request, response in zip(requests, responses, strict=True):
        for qid in request.questions:
            probabilities[int(qid)] = response.answers[qid].probability
    notes = notes_of(responses, lambda _, qid: int(qid))
    return Likelihoods([probabilities[i] for i in range(len(texts))], notes)
