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
one budget. A model that reads a question carrying the text inside it exactly
as the question asked with the text as the state says so
(:meth:`~decirank.backends.base.Backend.question_about`: the embedded model's
dense encoder does, and answers a call's questions with one encoder pass over
all their texts); for it the texts go as the questions of a few calls of
``max_questions`` each, as filter's items do. A text it has no such reading
for goes as its own request instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from ..backends.base import Backend
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ..types.answers import Usage
from ..types.questions import MAX_LEVELS, MIN_LEVELS, DecisionRequest, Example, LikelihoodQuestion, ScoreQuestion
from ._calibrated import calibrated, check_answered, check_model, load_calibration
from ._checks import (
    check_count,
    check_encodable,
    check_examples,
    check_instructions,
    check_items,
    check_no_blank,
    check_optional_text,
    shown_texts,
)
from ..errors import InvalidInputError
from ._definition import Cli, ToolDefinition, Wire, sync_twin_of
from ._graded import LevelDecision, LevelDecisionOut, check_levels, yes_no_reading
from ._likelihoods import TextNote, notes_of, questions_per_call
from ._outputs import Notes, Rows, ToolOutput
from ._params import (
    ApiKey,
    BaseUrl,
    CalibrationParam,
    DescribeParam,
    FromOne,
    ModelParam,
    Text,
    TextsParam,
    Timeout,
    LikelihoodExamples,
)

__all__ = ["DEFAULT_MAX_CONCURRENCY", "SCORE", "ScoreOutput", "ScoreResult", "ascore", "likelihood_examples", "score"]

QUESTION_ID = "score"
#: Requests in flight at once where each text is a request of its own.
DEFAULT_MAX_CONCURRENCY = 16


@dataclass(frozen=True)
class ScoreResult(Rows[float]):
    """A sequence of its ``probabilities``; ``to_dict()`` gives the tool's JSON shape."""

    rows = "probabilities"
    #: Each text's probability, in input order (empty with ``levels``).
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
    #: With ``levels``: each text's graded answer, in input order (the rows then).
    levels: list[LevelDecision] | None = None

    def _rows(self) -> list[Any]:
        return list(self.probabilities) if self.levels is None else list(self.levels)

    def to_dict(self) -> dict[str, Any]:
        raw = self.probabilities if self.raw_probabilities is None else self.raw_probabilities
        return {
            "probabilities": list(self.probabilities),
            "raw_probabilities": list(raw),
            "levels": None if self.levels is None else [decision.to_dict() for decision in self.levels],
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
    levels: list[LevelDecisionOut] | None = Field(
        None, description="With levels: each text's most likely level, expected level and distribution."
    )
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
    levels: Annotated[
        Sequence[str] | None,
        Wire(Annotated[list[Text], Field(min_length=MIN_LEVELS, max_length=MAX_LEVELS)] | None),
        Field(
            description="Ordered levels, lowest first (low, medium, high): each text gets its most likely level, "
            "expected level and distribution instead of a yes/no probability."
        ),
        Cli(read="labels", metavar="LOW,...,HIGH"),
    ] = None,
    describe: DescribeParam = None,
    true: Annotated[Text | None, Field(description="What a yes means.")] = None,
    false: Annotated[Text | None, Field(description="What a no means.")] = None,
    examples: LikelihoodExamples = None,
    model: ModelParam = DEFAULT_ROLE,
    timeout: Timeout = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    max_concurrency: Annotated[
        FromOne,
        Field(
            description="Requests in flight at once where each text is its own request (a hosted model); the "
            "embedded model takes many texts a call."
        ),
    ] = DEFAULT_MAX_CONCURRENCY,
    calibration: CalibrationParam = None,
) -> ScoreResult:
    """The probability that ``question`` is true of each text (any iterable; ``describe`` picks a field of
    each, else strings as they are and anything else as canonical JSON).

    Give ``levels`` (lowest first, e.g. ``["low", "medium", "high"]``) when the question asks for a
    degree ("How urgent is this ticket?"): each text then gets its most likely ``level``, its
    ``expected_level`` and the distribution over the levels (``result.levels``, and the rows of the
    result). Asked without levels, such a question is read as the yes/no question it implies
    ("Is this ticket urgent?"). ``max_concurrency`` bounds the requests in flight where each text is a request of its own
    (a hosted model's wire format); the embedded model takes many texts in each call.
    """
    describe = check_optional_text(describe, "describe")
    texts = check_encodable(shown_texts(check_items(texts, "texts"), describe, "texts"), "texts")
    check_no_blank(texts, "texts")
    question = check_instructions(question, "question")
    graded = check_levels(levels)
    if graded is not None:
        return await _graded(
            texts, question, graded, examples=examples, calibration=calibration, true=true, false=false,
            model=model, timeout=timeout, backend_options={"base_url": base_url, "api_key": api_key},
            concurrency=check_count(max_concurrency, "max_concurrency"),
        )
    # "How urgent is this ticket?" asks a degree; without levels, its yes/no reading is what is asked.
    question = yes_no_reading(question)
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
        "score", model=model, timeout=timeout, backend_options={"base_url": base_url, "api_key": api_key}, inputs=inputs
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


async def _graded(
    texts: list[str],
    question: str,
    levels: tuple[str, ...],
    *,
    examples: Any,
    calibration: Any,
    true: Any,
    false: Any,
    model: str | None,
    timeout: float | None,
    backend_options: dict[str, Any],
    concurrency: int,
) -> ScoreResult:
    """Each text as the state of one graded question over ``levels``."""
    for name, given in (("examples", examples), ("calibration", calibration), ("true", true), ("false", false)):
        if given is not None:
            raise InvalidInputError(name, f"no {name} with levels (they are for yes/no questions)", got=given)
    inputs = {"texts": texts, "question": question, "levels": list(levels)}
    async with ToolCall("score", model=model, timeout=timeout, backend_options=backend_options, inputs=inputs) as call:
        asked = ScoreQuestion(question, levels)
        requests = [DecisionRequest(state=text, questions={QUESTION_ID: asked}) for text in texts]
        responses = await call.ask_all(requests, concurrency=concurrency) if texts else []
        decisions = [
            LevelDecision.of(index, response.answers[QUESTION_ID], levels) for index, response in enumerate(responses)
        ]
        notes = notes_of(responses, lambda position, _: position)
        call.record_outputs({"levels": [decision.to_dict() for decision in decisions]})
        return ScoreResult([], call.answered_by, call.usage, call.run_id, notes, None, [], decisions)


def _texts_in_questions(chain: Sequence[Backend], question: str, texts: Sequence[str]) -> dict[int, str]:
    """The texts (by position) that go inside questions, each as the question that asks of it; see the docstring.

    Only where every model of the role reads such a question exactly as the text asked as the state
    (:meth:`~decirank.backends.base.Backend.question_about`), and reads it the same way, so a
    failover cannot change an answer.
    """
    found = {}
    for index, text in enumerate(texts):
        asked = {backend.question_about(question, text) for backend in chain}
        if len(asked) == 1 and None not in asked:
            found[index] = asked.pop()
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
