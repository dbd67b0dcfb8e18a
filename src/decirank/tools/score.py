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
``calibration`` names a stored calibration fitted for this question and model
(:mod:`decirank.tools.calibrate`): the probabilities are then the calibrated
ones, and ``raw_probabilities`` keeps the model's.

How the texts travel depends on what the role's models take in one call. The
System One and OpenAI wire formats carry one state per request, so each text
is its own request, at most ``max_concurrency`` in flight, all under the call's
one budget. The embedded model (``local``, with its dense encoder) reads a
yes/no question that ends in a labelled block, ``<question>\nText: <text>``,
as that question asked of the block, exactly as it reads the question asked
with the text as the state, and answers a call's questions with one encoder
pass over all their texts; so for it the texts go as the questions of a few
calls of ``max_questions`` each, as filter's items do. A text that would not
read back exactly (leading or trailing blanks), or a question that already has
a frame or a block of its own, goes as its own request instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from .._jsonpath import to_text
from ..backends.base import Backend
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ..stores.calibrations import Calibration
from ..types.answers import Usage
from ..types.questions import DecisionRequest, Example, LikelihoodQuestion
from ._calibrated import calibrated, check_answered, check_model, load_calibration
from ._checks import (
    check_count,
    check_encodable,
    check_examples,
    check_instructions,
    check_items,
    check_no_blank,
    check_optional_text,
)
from ._definition import Cli, ToolDefinition, sync_twin_of
from ._likelihoods import TextNote, notes_of, questions_per_call
from ._outputs import Notes, ToolOutput
from ._params import BaseUrl, CalibrationParam, FromOne, ModelParam, Text, TextsParam, Timeout, examples_param

__all__ = ["DEFAULT_MAX_CONCURRENCY", "SCORE", "ScoreOutput", "ScoreResult", "ascore", "likelihood_examples", "score"]

QUESTION_ID = "score"
#: The label of the block a text is asked in, where the texts go inside questions.
SUBJECT_LABEL = "Text"
#: Requests in flight at once where each text is a request of its own.
DEFAULT_MAX_CONCURRENCY = 16


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
    #: The calibration the probabilities went through, by name, or None.
    calibration: str | None = None
    #: The model's own probabilities (the same as ``probabilities`` without a calibration).
    raw_probabilities: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        raw = self.probabilities if self.raw_probabilities is None else self.raw_probabilities
        return {
            "probabilities": list(self.probabilities),
            "raw_probabilities": list(raw),
            "model": self.model,
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
            "notes": [note.to_dict() for note in self.notes],
            "calibration": self.calibration,
        }


class ScoreOutput(ToolOutput):
    """The result of score: one probability per text, in input order."""

    probabilities: list[float] = Field(description="Each text's probability, in input order (calibrated, with one).")
    raw_probabilities: list[float] = Field(description="The model's own probabilities (the same without one).")
    notes: Notes
    calibration: str | None = Field(None, description="The calibration the probabilities went through.")


def likelihood_examples(examples: Any, field_name: str = "examples") -> tuple[Example, ...]:
    """``[{"item" or "state": <text>, "answer": true/false}]`` (or Examples, or a stored set's name) as Examples."""
    return check_examples(
        examples, field_name, answer_ok=lambda answer: isinstance(answer, bool), expected_answer="true or false"
    )


async def ascore(
    texts: TextsParam,
    question: Annotated[Text, Field(description="The yes/no question asked of each text."), Cli(flags=("--question", "-q"))],
    *,
    true: Annotated[Text | None, Field(description="What a yes means.")] = None,
    false: Annotated[Text | None, Field(description="What a no means.")] = None,
    examples: examples_param("true|false") = None,
    model: ModelParam = DEFAULT_ROLE,
    timeout: Timeout = None,
    base_url: BaseUrl = None,
    max_concurrency: Annotated[
        FromOne,
        Field(
            description="Requests in flight at once where each text is its own request (a hosted model); the "
            "embedded model takes many texts a call."
        ),
    ] = DEFAULT_MAX_CONCURRENCY,
    calibration: CalibrationParam = None,
) -> ScoreResult:
    """The probability that ``question`` is true of each text (strings; anything else as canonical JSON).

    ``max_concurrency`` bounds the requests in flight where each text is a request of its own
    (a hosted model's wire format); the embedded model takes many texts in each call.
    """
    texts = check_encodable([to_text(text) for text in check_items(texts, "texts")], "texts")
    check_no_blank(texts, "texts")
    question = check_instructions(question, "question")
    true = check_optional_text(true, "true")
    false = check_optional_text(false, "false")
    examples = likelihood_examples(examples)
    inputs = {"texts": texts, "question": question, "true": true, "false": false}
    if examples:
        inputs["examples"] = [example.to_dict() for example in examples]
    concurrency = check_count(max_concurrency, "max_concurrency")
    map_used = load_calibration(calibration, "score", question)
    if map_used is not None:
        inputs["calibration"] = {"name": map_used.name, "data_hash": map_used.data_hash}
    async with ToolCall(
        "score", model=model, timeout=timeout, backend_options={"base_url": base_url}, inputs=inputs
    ) as call:
        assert call.decider is not None
        check_model(map_used, call)
        in_questions = _texts_in_questions(call.decider.chain, question, texts)
        per_call = questions_per_call(call, None)
        batched = sorted(in_questions)
        requests = [
            DecisionRequest(
                state={},
                questions={
                    str(i): LikelihoodQuestion(in_questions[i], true=true, false=false, examples=examples)
                    for i in batched[start : start + per_call]
                },
            )
            for start in range(0, len(batched), per_call)
        ]
        alone = [i for i in range(len(texts)) if i not in in_questions]
        asked = LikelihoodQuestion(question, true=true, false=false, examples=examples)
        requests += [DecisionRequest(state=texts[i], questions={QUESTION_ID: asked}) for i in alone]
        responses = await call.ask_all(requests, concurrency=concurrency) if texts else []
        probabilities: list[float] = [0.0] * len(texts)
        in_calls = len(responses) - len(alone)
        for response in responses[:in_calls]:
            for qid, answer in response.answers.items():
                probabilities[int(qid)] = float(answer.probability)
        for index, response in zip(alone, responses[in_calls:], strict=True):
            probabilities[index] = float(response.answers[QUESTION_ID].probability)

        def index_of(position: int, qid: str) -> int:
            return int(qid) if position < in_calls else alone[position - in_calls]

        notes = notes_of(responses, index_of)
        check_answered(map_used, call)
        raw, probabilities = probabilities, calibrated(map_used, probabilities)
        name = None if map_used is None else map_used.name
        call.record_outputs(
            {"probabilities": probabilities, "notes": [note.to_dict() for note in notes], "calibration": name}
        )
        return ScoreResult(probabilities, call.answered_by, call.usage, call.run_id, notes, name, raw)


def _texts_in_questions(chain: Sequence[Backend], question: str, texts: Sequence[str]) -> dict[int, str]:
    """The texts (by position) that go inside questions, each as the question that asks of it; see the docstring.

    Only where every model of the role reads such a question exactly as the text asked as the state,
    so a failover cannot change an answer: the embedded model with its dense encoder (the
    SPLADE-only variant compares a framed passage the other way round).
    """
    if not texts or not all(backend.provider == "local" for backend in chain):
        return {}
    # Imported only here: the chain is the embedded model, so its package is loaded already.
    from ..backends.local._model import VARIANTS
    from ..backends.local._text import split_question

    if not all(VARIANTS[backend.model].dense for backend in chain):
        return {}
    if split_question(question) != ("", question):
        return {}
    found = {}
    for index, text in enumerate(texts):
        asked = f"{question}\n{SUBJECT_LABEL}: {text}"
        if split_question(asked) == (question, text):
            found[index] = asked
    return found


score = sync_twin_of(ascore, "score")

SCORE = ToolDefinition(
    ascore,
    name="score",
    title="Score texts with a yes/no question",
    description=(
        "The probability that a yes/no question is true of each text: one likelihood question per text.\n\n"
        "Each text is the state its question is asked about ('Is this review positive?' of every review); "
        "true and false optionally say what each answer means. probabilities are in input order, and a text's "
        "score never depends on the other texts. Unlike builtin__filter, which asks about one state with each "
        "item inside the question, this asks about each text itself. examples (labelled texts, or a stored "
        "example set's name) teach a model that learns from them what the question means. calibration (a "
        "builtin__calibrate name) makes probabilities calibrated; raw_probabilities keeps the model's."
    ),
    result=ScoreOutput,
    command="score",
    route="/v1/score",
)
