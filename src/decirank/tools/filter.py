"""filter (the decide gate): an absolute yes or no per item.

Each item is one likelihood question, ``question`` followed by the item, asked
about ``state``; items whose probability reaches ``min_confidence`` are kept.
Unlike rank, an item's fate does not depend on the other items.

``calibration`` names a stored calibration (:mod:`decirank.tools.calibrate`)
fitted for this question and model: each item's probability is then the
calibrated one (``raw_probability`` keeps the model's), and ``target_recall``
or ``target_precision`` picks the cut-off from the calibration's labelled rows
so that the promise holds on new rows from the same source with
``confidence`` (:mod:`decirank.calibration._guarantees` says how); the result's
``promise`` states the cut-off and the bound.

``examples`` teach the question by labelled items: ``{"item": ..., "answer":
true/false}`` (the item is shown as items are: its ``describe`` path, else
the whole item as canonical JSON), ``{"state": <item text>, "answer": ...}``,
or the name of a stored example set (:mod:`decirank.stores.examples`, whose
``state`` is the item text). They travel with every item's question as
:class:`~decirank.types.questions.Example` s whose state is the item's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, Field

from .._progress import progress_bar
from ..calibration._guarantees import Cutoff
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ..errors import InvalidInputError
from ..stores.calibrations import Calibration
from ..types.answers import Usage
from ..types.questions import Example
from ._calibrated import calibrated, check_answered, check_model, cutoff_for, load_calibration
from ._checks import (
    check_examples,
    check_instructions,
    check_items,
    check_no_blank,
    check_optional_text,
    check_probability_threshold,
    check_state,
)
from ._definition import Cli, ToolDefinition, sync_twin_of
from ._likelihoods import Likelihoods, TextNote, ask_likelihoods, check_per_call, questions_per_call
from ._outputs import Notes, Rows, ToolOutput
from ._params import (
    ApiKey,
    BaseUrl,
    CalibrationParam,
    ConfidenceParam,
    DescribeParam,
    FromOne,
    ItemList,
    ModelParam,
    OpenUnit,
    ShowProgress,
    StateParam,
    Text,
    Timeout,
    Unit,
    ItemExamples,
)
from .rank import item_text, option_texts

__all__ = [
    "DEFAULT_MIN_CONFIDENCE",
    "FILTER",
    "FilterDecision",
    "FilterOutput",
    "FilterResult",
    "afilter",
    "filter",
    "filter_checked",
    "item_examples",
    "item_question",
]

DEFAULT_MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class FilterDecision:
    item: Any
    index: int
    #: The item's probability: the calibrated one when the call names a calibration.
    probability: float
    kept: bool
    #: The model's own probability (the same as ``probability`` without a calibration).
    raw_probability: float | None = None

    def to_dict(self) -> dict[str, Any]:
        raw = self.probability if self.raw_probability is None else self.raw_probability
        return {
            "item": self.item,
            "index": self.index,
            "probability": self.probability,
            "raw_probability": raw,
            "kept": self.kept,
        }


@dataclass(frozen=True)
class FilterResult(Rows[FilterDecision]):
    """A sequence of its ``decisions``; ``to_dict()`` gives the tool's JSON shape."""

    rows = "decisions"
    #: Every item's decision, in input order.
    decisions: list[FilterDecision]
    min_confidence: float = DEFAULT_MIN_CONFIDENCE
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None
    #: The model's notes on how it read items (``index``: the input position): an item cut
    #: short (``"cut"``), or one that does not look English (``"non_english"``).
    notes: list[TextNote] = field(default_factory=list)
    #: The calibration the probabilities went through, by name, or None.
    calibration: str | None = None
    #: The cut-off a ``target_recall``/``target_precision`` chose and what it promises, or None.
    promise: Cutoff | None = None

    @property
    def items(self) -> list[Any]:
        """The kept items, in input order."""
        return [decision.item for decision in self.decisions if decision.kept]

    @property
    def dropped(self) -> list[Any]:
        return [decision.item for decision in self.decisions if not decision.kept]

    @property
    def count(self) -> int:
        """How many items were kept."""
        return sum(decision.kept for decision in self.decisions)

    @property
    def dropped_count(self) -> int:
        return len(self.decisions) - self.count

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "count": self.count,
            "dropped": self.dropped,
            "dropped_count": self.dropped_count,
            "decisions": [decision.to_dict() for decision in self.decisions],
            "min_confidence": self.min_confidence,
            "model": self.model,
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
            "notes": [note.to_dict() for note in self.notes],
            "calibration": self.calibration,
            "promise": None if self.promise is None else self.promise.to_dict(),
        }


class FilterDecisionOut(BaseModel):
    item: Any
    index: int
    probability: float = Field(description="The item's probability: the calibrated one when a calibration is named.")
    raw_probability: float = Field(description="The model's own probability (the same without a calibration).")
    kept: bool


class PromiseOut(BaseModel):
    """The cut-off a target picked from a calibration's labelled rows, and what it promises on new items."""

    threshold: float | None = Field(description="The cut-off on the model's own probability; null keeps every item.")
    target_recall: float | None = None
    target_precision: float | None = None
    confidence: float
    method: str
    calibration_rows: int
    observed_recall: float = Field(description="The recall on the calibration's labelled rows at this cut-off.")
    observed_precision: float | None = Field(description="The precision on the labelled rows; null: none kept.")
    note: str | None = None
    batch_positives: int | None = Field(
        None, description="A recall promise: the fewest positives it assumed the batch holds (it holds for them too)."
    )


class FilterOutput(ToolOutput):
    """The result of filter: the kept items and every item's decision."""

    items: list[Any] = Field(description="The kept items, in input order.")
    count: int
    dropped: list[Any] = Field(description="The dropped items, in input order.")
    dropped_count: int
    decisions: list[FilterDecisionOut] = Field(
        description="Every item with its input index, probability, the model's own raw_probability and whether "
        "it was kept."
    )
    min_confidence: float
    notes: Notes
    calibration: str | None = Field(None, description="The calibration the probabilities went through.")
    promise: PromiseOut | None = Field(None, description="With target_recall or target_precision: the promise kept.")


def item_question(question: str, item_text: str) -> str:
    """The question asked of one item: the gate's question, then the item it is about."""
    return f"{question}\nItem: {item_text}"


def item_examples(examples: Any, describe: str | None) -> tuple[Example, ...]:
    """The filter's examples as :class:`Example` s whose state is the text the question judges.

    A set name is looked up in the example store; an ``item`` is shown as items are
    (``describe``'s dot path, else the whole item); a ``state`` is that text already.
    """

    def shown(item: Any, where: str) -> str:
        text = item_text(item, describe)
        if text is None:
            raise InvalidInputError(where, f"an item with the describe path {describe!r}")
        return text

    return check_examples(
        examples,
        "examples",
        answer_ok=lambda answer: isinstance(answer, bool),
        expected_answer="true or false",
        item_text=shown,
    )


async def afilter(
    items: Annotated[ItemList, Field(description="The list, usually a template like {{E1.items}}."), Cli(argument=True, read="items")],
    question: Annotated[Text, Field(description="The yes/no question asked of each item."), Cli(flags=("--question", "-q"))],
    state: StateParam = None,
    *,
    min_confidence: Annotated[
        Unit | None,
        Field(
            description=f"Keep items at least this likely; default {DEFAULT_MIN_CONFIDENCE:g} (a target picks it "
            "instead)."
        ),
    ] = None,
    describe: DescribeParam = None,
    model: ModelParam = DEFAULT_ROLE,
    timeout: Timeout = None,
    max_items_per_call: Annotated[
        FromOne | None,
        Field(description="Items asked per model call when the model declares no limit."),
        Cli(flags=("--per-call",)),
    ] = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    examples: ItemExamples = None,
    show_progress: ShowProgress = False,
    calibration: CalibrationParam = None,
    target_recall: Annotated[
        OpenUnit | None,
        Field(
            description="Keep at least this share of the yes items, with confidence; the calibration's labelled "
            "rows pick the cut-off (needs calibration)."
        ),
    ] = None,
    target_precision: Annotated[
        OpenUnit | None,
        Field(description="Keep items of which at least this share are yes, with confidence (needs calibration)."),
    ] = None,
    confidence: ConfidenceParam = None,
) -> FilterResult:
    """Keep the items for which ``question`` is likely true, given ``state`` (optional: none is no context).

    ``describe`` is a dot path into each item to show (the whole item otherwise).
    ``examples`` are labelled items the model may learn from: a list of
    ``{"item": ..., "answer": bool}`` or ``{"state": <item text>, "answer": bool}``,
    or the name of a stored example set. ``min_confidence`` (default 0.5) is the cut-off on the
    (calibrated) probability, unless ``target_recall`` or ``target_precision`` (0 to 1, with a
    ``calibration``: a stored one's name, or a :class:`~decirank.stores.calibrations.Calibration`)
    picks it with ``confidence`` (default 0.9). ``show_progress`` draws a bar on stderr, when it is
    a terminal, as the model calls finish.
    """
    items = check_items(items)
    question = check_instructions(question, "question")
    state = check_state(state)
    threshold = check_probability_threshold(min_confidence, "min_confidence")
    map_used = load_calibration(calibration, "filter", question)
    promise = cutoff_for(map_used, target_recall, target_precision, confidence, len(items), threshold)
    return await filter_checked(
        items,
        question,
        state,
        threshold=threshold,
        calibration=map_used,
        promise=promise,
        describe=describe,
        model=model,
        timeout=timeout,
        max_items_per_call=max_items_per_call,
        base_url=base_url,
        api_key=api_key,
        examples=examples,
        show_progress=show_progress,
    )


async def filter_checked(
    items: list[Any],
    question: str,
    state: Any,
    *,
    threshold: float | None,
    calibration: Calibration | None,
    promise: Cutoff | None,
    describe: str | None = None,
    model: str = DEFAULT_ROLE,
    timeout: float | None = None,
    max_items_per_call: int | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    examples: Sequence[Any] | str | None = None,
    show_progress: bool = False,
) -> FilterResult:
    """:func:`afilter` with its arguments checked, its calibration loaded and its cut-off (if any) chosen.

    ``threshold`` is None with a ``promise``, whose cut-off decides. ``decirank batch`` asks each
    chunk through here with the cut-off its driver chose once for every row of the input: one
    chosen per chunk would promise for that chunk, not for the batch.
    """
    assert promise is None or threshold is None, "a promise's cut-off decides, not a threshold"
    if threshold is None:
        threshold = DEFAULT_MIN_CONFIDENCE
    texts = option_texts(items, check_optional_text(describe, "describe"))
    check_no_blank(texts, "items")
    given_examples = examples
    examples = item_examples(examples, describe)
    requested_per_call = check_per_call(max_items_per_call, "max_items_per_call")
    inputs = {"items": items, "question": question, "state": state, "min_confidence": threshold, "describe": describe}
    if calibration is not None:
        inputs["calibration"] = {"name": calibration.name, "data_hash": calibration.data_hash}
    if promise is not None:
        inputs["promise"] = promise.to_dict()
    if given_examples is not None:
        inputs["examples"] = [example.to_dict() for example in examples]
        if isinstance(given_examples, str):
            inputs["example_set"] = given_examples
    async with ToolCall(
        "filter", model=model, timeout=timeout, backend_options={"base_url": base_url, "api_key": api_key}, inputs=inputs
    ) as call:
        check_model(calibration, call)
        per_call = questions_per_call(call, requested_per_call)
        questions = [item_question(question, text) for text in texts]
        with progress_bar("filter", len(questions), enabled=show_progress and bool(items)) as advance:
            asked = (
                await ask_likelihoods(call, state, questions, per_call, examples, on_answered=advance)
                if items
                else Likelihoods([], [])
            )
        check_answered(calibration, call)
        raw = asked.probabilities
        mapped = calibrated(calibration, raw)
        decisions = [
            FilterDecision(
                item, index, probability, _kept(probability, model_probability, threshold, promise), model_probability
            )
            for index, (item, probability, model_probability) in enumerate(zip(items, mapped, raw, strict=True))
        ]
        name = None if calibration is None else calibration.name
        call.record_outputs(
            {
                "kept": sum(d.kept for d in decisions),
                "decisions": [d.to_dict() for d in decisions],
                "notes": [note.to_dict() for note in asked.notes],
                "calibration": name,
                "promise": None if promise is None else promise.to_dict(),
            }
        )
        return FilterResult(decisions, threshold, call.answered_by, call.usage, call.run_id, asked.notes, name, promise)


def _kept(probability: float, model_probability: float, threshold: float, promise: Cutoff | None) -> bool:
    """A promise's cut-off is on the model's own probability (as its labelled rows were); else the threshold."""
    if promise is None:
        return probability >= threshold
    return promise.threshold is None or model_probability >= promise.threshold


filter = sync_twin_of(afilter, "filter")  # shadows the builtin on purpose: it is the tool's name

FILTER = ToolDefinition(
    afilter,
    name="filter",
    title="Filter a list (decide gate)",
    description=(
        "Keeps the items for which a yes/no question is likely true: an absolute decision per item, not an "
        "order.\n\n"
        "Each item is one likelihood question (the question, then the item's describe field or the whole "
        "item) asked about state; items whose probability reaches min_confidence (default 0.5) are kept. "
        "items and dropped keep the input order, and decisions carries every item's probability. An item's "
        "fate does not depend on the other items; to order a list, use builtin__rank. examples (labelled items, "
        "or a stored example set's name) teach a model that learns from them what the question means. calibration "
        "(a builtin__calibrate name) makes probabilities calibrated; with it, target_recall or target_precision "
        "picks the cut-off from the calibration's labelled rows so that the target holds on new items with "
        "confidence (default 0.9), and promise says the cut-off and what the labelled rows showed at it."
    ),
    result=FilterOutput,
    command="filter",
    route="/v1/filter",
)
