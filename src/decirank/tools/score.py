"""score: one likelihood per text, the text being what the question is asked about.

Each text is the state of its own :class:`~decirank.types.questions.LikelihoodQuestion`
(``question``, with optional ``true``/``false`` descriptions of each outcome), as
``decirank eval labels --type noul`` asks it; its score is the probability. A
text's score never depends on the other texts of the call. ``examples`` are
labelled texts, ``{"item": <text>, "answer": true/false}`` (``"state"`` for ``"item"`` too,
as every tool and ``decirank examples add`` take them), or a stored set's name.

Unlike filter, which asks about one state with the item inside the question,
score asks about each text itself ("Is this review positive?" of every review).
A failed call, or an answer missing or outside [0, 1], fails the whole call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._jsonpath import to_text
from .._sync import run_sync, sync_twin
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ..types.answers import Usage
from ..types.questions import DecisionRequest, Example, LikelihoodQuestion
from ._checks import check_encodable, check_examples, check_instructions, check_items, check_optional_text
from ._likelihoods import TextNote, notes_of

__all__ = ["ScoreResult", "ascore", "likelihood_examples", "score"]

QUESTION_ID = "score"


@dataclass(frozen=True)
class ScoreResult:
    #: Each text's probability, in input order.
    probabilities: list[float]
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None
    #: The model's notes on how it read texts (``index``: the input position): a text cut
    #: short (``"cut"``), or one that does not look English (``"non_english"``).
    notes: list[TextNote] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "probabilities": list(self.probabilities),
            "model": self.model,
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
            "notes": [note.to_dict() for note in self.notes],
        }


def likelihood_examples(examples: Any, field_name: str = "examples") -> tuple[Example, ...]:
    """``[{"item" or "state": <text>, "answer": true/false}]`` (or Examples, or a stored set's name) as Examples."""
    return check_examples(
        examples, field_name, answer_ok=lambda answer: isinstance(answer, bool), expected_answer="true or false"
    )


async def ascore(
    texts: Sequence[Any],
    question: str,
    *,
    true: str | None = None,
    false: str | None = None,
    examples: Sequence[Any] | str | None = None,
    model: str = DEFAULT_ROLE,
    timeout: float | None = None,
    base_url: str | None = None,
) -> ScoreResult:
    """The probability that ``question`` is true of each text (strings; anything else as canonical JSON)."""
    texts = check_encodable([to_text(text) for text in check_items(texts, "texts")], "texts")
    question = check_instructions(question, "question")
    true = check_optional_text(true, "true")
    false = check_optional_text(false, "false")
    examples = likelihood_examples(examples)
    inputs = {"texts": texts, "question": question, "true": true, "false": false}
    if examples:
        inputs["examples"] = [example.to_dict() for example in examples]
    async with ToolCall(
        "score", model=model, timeout=timeout, backend_options={"base_url": base_url}, inputs=inputs
    ) as call:
        asked = LikelihoodQuestion(question, true=true, false=false, examples=examples)
        requests = [DecisionRequest(state=text, questions={QUESTION_ID: asked}) for text in texts]
        responses = await call.ask_all(requests) if texts else []
        probabilities = [float(response.answers[QUESTION_ID].probability) for response in responses]
        notes = notes_of(responses, lambda position, _: position)
        call.record_outputs({"probabilities": probabilities, "notes": [note.to_dict() for note in notes]})
        return ScoreResult(probabilities, call.answered_by, call.usage, call.run_id, notes)


@sync_twin(ascore)
def score(
    texts: Sequence[Any],
    question: str,
    *,
    true: str | None = None,
    false: str | None = None,
    examples: Sequence[Any] | str | None = None,
    model: str = DEFAULT_ROLE,
    timeout: float | None = None,
    base_url: str | None = None,
) -> ScoreResult:
    """Sync twin of :func:`ascore`, which takes the same arguments; use that one in async code."""
    return run_sync(
        ascore,
        texts,
        question,
        true=true,
        false=false,
        examples=examples,
        model=model,
        timeout=timeout,
        base_url=base_url,
    )
