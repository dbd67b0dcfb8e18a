"""classify: one choice question per text, over options the caller gives.

Each text is the state of its own :class:`~decirank.types.questions.ChoiceQuestion`
(``question`` over ``options``), so a text's answer never depends on the other
texts of the call. ``options`` is a list of labels (each its own description)
or a mapping of key to description; ``none`` adds a "none of these" option,
asked under the key ``none`` and reported as the text the caller gave, so a
caller who passed ``none="none of these"`` finds ``choice == "none of these"``.
``examples`` are labelled texts whose answer is an option key (or that text).

``calibration`` names a stored calibration fitted for this question, these
options and this model (:mod:`decirank.tools.calibrate`): the probabilities
are then the calibrated ones, and ``coverage`` (0 to 1) gives each text a
conformal prediction set, the fewest options that hold the right one for at
least that share of new texts from the same source, with ``confidence``
(default 0.9). An empty set, or one
holding the ``none`` option, says that no option fits (``none_fits``).

A failed call, or an answer missing or outside [0, 1], fails the whole call:
no choice is ever invented. :mod:`decirank.batching` runs it over large files,
isolating the rows that fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, Field

from ..calibration._guarantees import ConformalSets, conformal_sets
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ..errors import InvalidInputError
from ..types.answers import Usage
from ..types.questions import MAX_OPTIONS, MIN_OPTIONS, ChoiceQuestion, DecisionRequest, Example
from ._calibrated import calibrated, check_answered, check_confidence, check_model, load_calibration
from ._checks import (
    check_encodable,
    check_examples,
    check_instructions,
    check_items,
    check_no_blank,
    check_optional_text,
    check_probability_threshold,
    shown_texts,
)
from ._definition import Cli, ToolDefinition, Wire, sync_twin_of
from ._outputs import Rows, ToolOutput
from ._params import (
    ApiKey,
    BaseUrl,
    CalibrationParam,
    DescribeParam,
    ModelParam,
    OpenUnit,
    Text,
    TextsParam,
    Timeout,
    ChoiceExamples,
)

__all__ = [
    "CLASSIFY",
    "NONE_KEY",
    "ClassifyDecision",
    "ClassifyOutput",
    "ClassifyResult",
    "aclassify",
    "check_options",
    "choice_examples",
    "classify",
]

NONE_KEY = "none"
QUESTION_ID = "classify"

_OPTIONS_EXPECTED = f"a list of {MIN_OPTIONS} to {MAX_OPTIONS} labels, or an object of label to description"


@dataclass(frozen=True)
class ClassifyDecision:
    #: The text's position in the input.
    index: int
    #: The chosen option's key, or the caller's ``none`` text when "none of these" won.
    choice: str
    #: The chosen option's probability.
    probability: float
    #: Every option's probability, by key (the ``none`` text for "none of these").
    probabilities: dict[str, float]
    #: With ``coverage``: the options that hold the right one at that rate, most probable first.
    prediction_set: list[str] | None = None
    #: With ``coverage``: True when the set is empty or holds the ``none`` option.
    none_fits: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        found = {
            "index": self.index,
            "choice": self.choice,
            "probability": self.probability,
            "probabilities": dict(self.probabilities),
        }
        if self.prediction_set is not None:
            found["prediction_set"] = list(self.prediction_set)
            found["none_fits"] = self.none_fits
        return found


@dataclass(frozen=True)
class ClassifyResult(Rows[ClassifyDecision]):
    """A sequence of its ``decisions``; ``to_dict()`` gives the tool's JSON shape."""

    rows = "decisions"
    #: One decision per text, in input order.
    decisions: list[ClassifyDecision]
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None
    #: The calibration the probabilities went through, by name, or None.
    calibration: str | None = None
    #: With ``coverage``: the conformal threshold and what it promises.
    sets: ConformalSets | None = None

    @property
    def mean_set_size(self) -> float | None:
        sized = [len(d.prediction_set) for d in self.decisions if d.prediction_set is not None]
        return sum(sized) / len(sized) if sized else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisions": [decision.to_dict() for decision in self.decisions],
            "model": self.model,
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
            "calibration": self.calibration,
            "coverage": None if self.sets is None else {**self.sets.to_dict(), "mean_set_size": self.mean_set_size},
        }


def check_options(options: Any, none: str | None = None, field_name: str = "options") -> dict[str, str]:
    """Options as key -> description: a list of labels, or a mapping; ``none`` adds the ``none`` key."""
    if isinstance(options, Mapping):
        checked = dict(options)
    elif isinstance(options, Sequence) and not isinstance(options, str | bytes):
        checked = {}
        for position, label in enumerate(options):
            if not isinstance(label, str) or not label.strip():
                raise InvalidInputError(f"{field_name}.{position}", "a non-empty label", got=label)
            if label in checked:
                raise InvalidInputError(f"{field_name}.{position}", "labels that differ", detail=f"{label!r} twice")
            checked[label] = label
    else:
        raise InvalidInputError(field_name, _OPTIONS_EXPECTED, got=options)
    for key, description in checked.items():
        if not isinstance(key, str) or not key.strip():
            raise InvalidInputError(field_name, "non-empty labels as keys", got=key)
        if not isinstance(description, str):
            raise InvalidInputError(f"{field_name}.{key}", "a string description", got=description)
    if none is not None:
        if NONE_KEY in checked:
            raise InvalidInputError(field_name, f"no option named {NONE_KEY!r} when none is given", got=NONE_KEY)
        checked[NONE_KEY] = none
    if not MIN_OPTIONS <= len(checked) <= MAX_OPTIONS:
        raise InvalidInputError(field_name, _OPTIONS_EXPECTED, detail=f"{len(checked)} options")
    return check_encodable(checked, field_name)


def choice_examples(examples: Any, options: Mapping[str, str], field_name: str = "examples") -> tuple[Example, ...]:
    """``[{"item" or "state": <text>, "answer": <option key>}]`` (or Examples, or a stored set's name) as Examples."""
    return check_examples(
        examples,
        field_name,
        answer_ok=lambda answer: isinstance(answer, str) and answer in options,
        expected_answer="one of the option keys",
    )


class ClassifyDecisionOut(BaseModel):
    index: int = Field(description="The text's position in the input.")
    choice: str = Field(description="The chosen option's key (the none text when 'none of these' won).")
    probability: float
    probabilities: dict[str, float]
    prediction_set: list[str] | None = Field(
        None, description="With coverage: the options that hold the right one at that rate, most probable first."
    )
    none_fits: bool | None = Field(
        None, description="With coverage: true when the set is empty or holds the 'none of these' option."
    )


class CoverageOut(BaseModel):
    """The conformal threshold ``coverage`` picked from the calibration's labelled rows."""

    coverage: float
    confidence: float
    threshold: float = Field(description="An option is in a set when 1 - its model probability is at most this.")
    calibration_rows: int
    method: str
    mean_set_size: float | None


class ClassifyOutput(ToolOutput):
    """The result of classify: one decision per text, in input order."""

    decisions: list[ClassifyDecisionOut]
    calibration: str | None = Field(None, description="The calibration the probabilities went through.")
    coverage: CoverageOut | None = Field(None, description="With coverage: the prediction sets' threshold.")


def classify_requests(
    texts: Sequence[str], question: str, options: Mapping[str, str], examples: Sequence[Example]
) -> list[DecisionRequest]:
    """One request per text: the text is the state of one choice question."""
    asked = ChoiceQuestion(question, options, examples=tuple(examples))
    return [DecisionRequest(state=text, questions={QUESTION_ID: asked}) for text in texts]


async def aclassify(
    texts: TextsParam,
    question: Annotated[Text, Field(description="The choice question asked of each text."), Cli(flags=("--question", "-q"))],
    options: Annotated[
        Sequence[str] | Mapping[str, str],
        Wire(
            Annotated[list[str], Field(min_length=1, max_length=255)]
            | Annotated[dict[str, str], Field(min_length=1, max_length=255)]
        ),
        Field(description="The labels, or an object of label to description (2 to 255 options, none's counted)."),
        Cli(read="options", metavar="LABELS"),
    ],
    *,
    none: Annotated[Text | None, Field(description=f"Text of a 'none of these' option (key {NONE_KEY}).")] = None,
    describe: DescribeParam = None,
    examples: ChoiceExamples = None,
    model: ModelParam = DEFAULT_ROLE,
    timeout: Timeout = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    calibration: CalibrationParam = None,
    coverage: Annotated[
        OpenUnit | None,
        Field(
            description="Give each text a prediction set that holds its right option for at least this share of new "
            "texts, with confidence (conformal, from the calibration's labelled rows). Needs calibration."
        ),
    ] = None,
    confidence: Annotated[OpenUnit | None, Field(description="How sure coverage's promise is; default 0.9.")] = None,
) -> ClassifyResult:
    """Pick, for each text, the option of ``options`` that ``question`` asks for.

    ``texts`` is any iterable of strings (anything else is shown as canonical JSON; ``describe`` picks a
    field of each, e.g. a CSV column); each is asked on its own.
    """
    describe = check_optional_text(describe, "describe")
    texts = check_encodable(shown_texts(check_items(texts, "texts"), describe, "texts"), "texts")
    check_no_blank(texts, "texts")
    question = check_instructions(question, "question")
    none = check_optional_text(none, "none")
    options = check_options(options, none)
    if none is not None and none in options and none != NONE_KEY:
        raise InvalidInputError("none", "a text that is not one of the options", got=none)
    reported = {key: none if key == NONE_KEY and none is not None else key for key in options}
    examples = tuple(
        Example(example.state, NONE_KEY) if none is not None and example.answer == none else example
        for example in choice_examples(examples, {**options, **({none: none} if none is not None else {})})
    )
    inputs = {"texts": texts, "question": question, "options": options}
    if examples:
        inputs["examples"] = [example.to_dict() for example in examples]
    map_used = load_calibration(calibration, "classify", question, options)
    sets = _sets_for(map_used, coverage, confidence, len(texts))
    if map_used is not None:
        inputs["calibration"] = {"name": map_used.name, "data_hash": map_used.data_hash}
    if sets is not None:
        inputs["coverage"] = sets.coverage
    async with ToolCall(
        "classify", model=model, timeout=timeout, backend_options={"base_url": base_url, "api_key": api_key}, inputs=inputs
    ) as call:
        check_model(map_used, call)
        responses = await call.ask_all(classify_requests(texts, question, options, examples)) if texts else []
        check_answered(map_used, call)
        keys = list(options)
        decisions = []
        for index, response in enumerate(responses):
            answer = response.answers[QUESTION_ID]
            raw = [float(answer.probabilities[key]) for key in keys]
            # The set is read off the model's own numbers, as the calibration's rows were.
            members = None if sets is None else [reported[keys[column]] for column in sets.members(raw)]
            mapped = calibrated(map_used, raw)
            probabilities = {reported[key]: p for key, p in zip(keys, mapped, strict=True)}
            # A temperature keeps each text's order of options, so the model's choice stays the top one.
            choice = reported[answer.choice]
            none_fits = None if members is None else (not members or (none is not None and none in members))
            decisions.append(ClassifyDecision(index, choice, probabilities[choice], probabilities, members, none_fits))
        name = None if map_used is None else map_used.name
        call.record_outputs(
            {
                "decisions": [
                    {"choice": d.choice, "probability": d.probability, "prediction_set": d.prediction_set}
                    for d in decisions
                ],
                "calibration": name,
            }
        )
        return ClassifyResult(decisions, call.answered_by, call.usage, call.run_id, name, sets)


def _sets_for(calibration: Any, coverage: Any, confidence: Any, batch_size: int) -> ConformalSets | None:
    """The conformal threshold for ``coverage`` from the calibration's labelled rows (checked arguments)."""
    level = check_probability_threshold(coverage, "coverage")
    if level is None:
        return None
    if not 0.0 < level < 1.0:
        raise InvalidInputError("coverage", "a number between 0 and 1 (exclusive)", got=coverage)
    if calibration is None:
        raise InvalidInputError("calibration", "the name of a stored calibration, which coverage needs", got=None)
    return conformal_sets(calibration.scores, level, check_confidence(confidence), batch_size)


classify = sync_twin_of(aclassify, "classify")

CLASSIFY = ToolDefinition(
    aclassify,
    name="classify",
    title="Classify texts",
    description=(
        "Picks, for each text, the option a question asks for: one choice question per text.\n\n"
        "Each text is the state of its own choice question over options (a list of labels, or an object of "
        "label to description), so a text's answer never depends on the other texts. none adds a 'none of "
        f"these' option whose key is {NONE_KEY}. decisions carries, per text in input order, the chosen key, its "
        "probability and every option's probability. examples (labelled texts, or a stored example set's name) "
        "teach a model that learns from them what the options mean. calibration (a builtin__calibrate name) "
        "makes probabilities calibrated; with it, coverage gives each text a prediction_set that holds its right "
        "option at that rate on new texts, and none_fits when the set is empty or holds the none option."
    ),
    result=ClassifyOutput,
    command="classify",
    route="/v1/classify",
)
