"""calibrate: fit a map from a model's probabilities to what the user's labelled rows show, and keep it by name.

Given labelled rows for one question (the examples format every tool takes:
``{"item" or "state": <text>, "answer": true/false}``, or an option key for
``classify``) and a model or role, it asks the model through the tool the map
is for (``filter``, ``score``, ``rerank`` or ``classify``), so the numbers it
maps are exactly the ones that tool returns. Then it:

- picks a map by five-fold cross-validated log loss: for yes/no, the model as
  it is, Platt's logistic (drawn towards the model as it is by a prior whose
  strength the same folds pick) or isotonic steps
  (:mod:`decirank.calibration._maps`); for a choice, the model as it is or a
  temperature;
- reports reliability before (the model's numbers) and after (out-of-fold
  calibrated numbers, so no row judges a map fitted on it): ECE, Brier, log
  loss and a ten-bin table;
- stores the map under ``name`` with the tool, model, question, options and
  data hash it was fitted for, and each row's model probability and label, from
  which ``target_recall``, ``target_precision`` and ``coverage`` are computed.

It needs at least :data:`MIN_ROWS` rows, and for yes/no :data:`MIN_EACH` of
each answer; about 100 make a map worth trusting (ECE near 0.03-0.05 on the
development sets). A rerank calibration is for one query, or for any query
when each row names its own ``query``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from .._jsonpath import to_text
from ..calibration._maps import LIKELIHOOD_METHODS, choose_map, choose_temperature, reliability
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall, gather
from ..errors import InvalidInputError
from ..stores._database import timestamp
from ..stores.calibrations import Calibration, CalibrationStore, check_calibration_name
from ..stores.examples import resolve_examples
from ..stores.runlog import under_parent_run
from ..types.answers import Usage
from ._checks import check_examples, check_instructions, check_optional_text
from ._definition import Cli, Offered, ToolDefinition, Wire, sync_twin_of
from ._outputs import ToolOutput
from ._params import ApiKey, BaseUrl, ModelParam, SetName, Text, Timeout
from .classify import NONE_KEY, aclassify, check_options
from .filter import afilter
from .rerank import arerank
from .score import ascore

__all__ = [
    "CALIBRATE",
    "CALIBRATED_TOOLS",
    "MIN_EACH",
    "MIN_ROWS",
    "CalibrateOutput",
    "CalibrateResult",
    "CalibrationSummaryOut",
    "acalibrate",
    "calibrate",
]

CALIBRATED_TOOLS = ("filter", "score", "rerank", "classify")
#: Fewer labelled rows than this fit noise, not the model.
MIN_ROWS = 20
#: A yes/no map needs this many rows of each answer.
MIN_EACH = 5
CHOICE_METHODS = ("identity", "temperature")


@dataclass(frozen=True)
class CalibrateResult:
    calibration: Calibration
    #: Whether it was stored under its name (``save=False`` only measures).
    saved: bool
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.calibration.summary(), "saved": self.saved, "usage": self.usage.to_dict(), "run_id": self.run_id}


class ReliabilityBin(BaseModel):
    low: float
    high: float
    rows: int
    mean_probability: float
    frequency: float


class Reliability(BaseModel):
    """How far probabilities are from the frequencies they claim: ECE over ten bins, Brier, log loss."""

    rows: int
    ece: float = Field(description="Expected calibration error over ten bins.")
    brier: float
    log_loss: float
    table: list[ReliabilityBin] = Field(description="One entry per non-empty bin.")


class ProbabilityMap(BaseModel):
    method: str
    parameters: dict[str, Any]


class CalibrationSummaryOut(BaseModel):
    """A stored calibration: what it was fitted for, its map, and reliability before and after."""

    name: str
    tool: str
    model: str = Field(description="The model it was fitted for; the tools refuse it for another.")
    question: str | None
    options: dict[str, str] | None
    data_hash: str = Field(description="SHA-256 of the labelled rows, question and options.")
    created_at: str
    rows: int
    positives: int | None = Field(None, description="Yes/no: how many rows were labelled yes.")
    method: str = Field(description="The map chosen.")
    map: ProbabilityMap
    before: Reliability = Field(description="The model's own probabilities on the labelled rows.")
    after: Reliability = Field(description="Out-of-fold calibrated probabilities: no row judges a map fitted on it.")
    cross_validated_log_loss: dict[str, float]
    run_id: str | None


class CalibrateOutput(CalibrationSummaryOut, ToolOutput):
    """The result of calibrate: the calibration's summary, whether it was stored, and usage."""

    saved: bool


@dataclass(frozen=True)
class _Row:
    text: str
    answer: Any
    query: str | None = None


def _check_rows(
    rows: Any, tool: str, options: Mapping[str, str] | None, none: str | None, question: str | None
) -> list[_Row]:
    """The labelled rows, each problem named by its place (``rows.3.answer``)."""
    rows = resolve_examples(rows, "rows")
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Sequence):
        raise InvalidInputError(
            "rows", 'a list of {"item" or "state", "answer"} or a stored example set\'s name', got=rows
        )
    queries: list[str | None] = []
    plain = []
    for index, row in enumerate(rows):
        if tool == "rerank" and isinstance(row, Mapping) and "query" in row:
            if question is not None:
                raise InvalidInputError(f"rows.{index}.query", "no query on a row when the question is given")
            queries.append(check_instructions(row["query"], f"rows.{index}.query"))
            plain.append({key: value for key, value in row.items() if key != "query"})
        else:
            if tool == "rerank" and question is None:
                raise InvalidInputError(f"rows.{index}", 'a row with its "query", as no question is given')
            queries.append(None)
            plain.append(row)
    if options is None:
        checked = check_examples(
            plain, "rows", answer_ok=lambda answer: isinstance(answer, bool), expected_answer="true or false"
        )
    else:
        keys = {**options, **({none: none} if none is not None else {})}
        checked = check_examples(
            plain,
            "rows",
            answer_ok=lambda answer: isinstance(answer, str) and answer in keys,
            expected_answer=f"one of the option keys {sorted(keys)}",
        )
    found = []
    for index, (example, query) in enumerate(zip(checked, queries, strict=True)):
        text = to_text(example.state)
        if not text.strip():
            raise InvalidInputError(f"rows.{index}", "a row with a non-blank text")
        answer = example.answer
        if options is not None and none is not None and answer == none:
            answer = NONE_KEY
        found.append(_Row(text, answer, query))
    if len(found) < MIN_ROWS:
        raise InvalidInputError(
            "rows",
            f"at least {MIN_ROWS} labelled rows (about 100 make a trustworthy map)",
            detail=f"{len(found)} given",
        )
    if options is None:
        yes = sum(row.answer for row in found)
        if min(yes, len(found) - yes) < MIN_EACH:
            raise InvalidInputError(
                "rows", f"at least {MIN_EACH} rows of each answer", detail=f"{yes} true and {len(found) - yes} false"
            )
    return found


def _data_hash(tool: str, question: str | None, state: Any, options: Mapping[str, str] | None, rows: list[_Row]) -> str:
    canonical = json.dumps(
        {
            "tool": tool,
            "question": question,
            "state": state,
            "options": options,
            "rows": [[row.query, row.text, row.answer] for row in rows],
        },
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


async def _likelihoods(
    tool: str, rows: list[_Row], question: str | None, *, state: Any, true: str | None, false: str | None, **asked: Any
) -> tuple[list[float], str, Usage]:
    """Each row's probability as ``tool`` returns it, the model that answered, and what it cost."""
    texts = [row.text for row in rows]
    if tool == "filter":
        result = await afilter(texts, question, state, min_confidence=0.0, **asked)
        return [decision.probability for decision in result.decisions], result.model, result.usage
    if tool == "score":
        result = await ascore(texts, question, true=true, false=false, **asked)
        return list(result.probabilities), result.model, result.usage
    # rerank: one call per query; ids are positions, so each score goes back to its row.
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(row.query if row.query is not None else question, []).append(index)

    async def reranked(query: str, members: list[int]) -> Any:
        return await arerank(query, [texts[i] for i in members], **asked)

    results = await gather([lambda q=q, m=m: reranked(q, m) for q, m in groups.items()])
    probabilities = [0.0] * len(rows)
    usage = Usage()
    models = []
    for (_, members), result in zip(groups.items(), results, strict=True):
        for document in result.results:
            probabilities[members[document.id]] = document.relevance_score
        usage = usage + result.usage
        models.append(result.model)
    return probabilities, ", ".join(sorted(set(models))), usage


async def acalibrate(
    rows: Annotated[
        Sequence[Any] | str,
        Wire(list[dict[str, Any]] | SetName),
        Field(
            description='Labelled rows: [{"item" or "state": <text>, "answer": true/false}] (classify: an option key; '
            f'rerank: optionally a "query" per row), at least {MIN_ROWS} with {MIN_EACH} of each yes/no answer, or '
            "the name of a stored example set."
        ),
        Cli(argument=True, read="examples", metavar="ROWS"),
    ],
    question: Annotated[
        Text | None,
        Field(description="The question the tool asks (rerank: the query; null when each row has its own query)."),
        Cli(flags=("--question", "-q")),
    ] = None,
    *,
    name: Annotated[
        SetName | None,
        Field(description="The name to store it under (a letter or digit, then letters, digits, _, . or -)."),
    ] = None,
    tool: Annotated[Literal[CALIBRATED_TOOLS], Field(description="The tool whose probabilities are calibrated.")] = "filter",  # type: ignore[valid-type]
    state: Annotated[Any, Field(description="filter's context the items are judged against."), Cli(read="json_or_text")] = None,
    options: Annotated[
        Sequence[str] | Mapping[str, str] | None,
        Wire(
            Annotated[list[str], Field(min_length=1, max_length=255)]
            | Annotated[dict[str, str], Field(min_length=1, max_length=255)]
            | None
        ),
        Field(description="classify's labels, or an object of label to description."),
        Cli(read="options"),
    ] = None,
    none: Annotated[Text | None, Field(description="classify's 'none of these' option.")] = None,
    true: Annotated[Text | None, Field(description="score's: what a yes means.")] = None,
    false: Annotated[Text | None, Field(description="score's: what a no means.")] = None,
    method: Annotated[
        Literal[("auto", *LIKELIHOOD_METHODS, *CHOICE_METHODS[1:])],  # type: ignore[valid-type]
        Field(
            description="auto picks by cross-validated log loss (identity, platt or isotonic; classify: identity or "
            "temperature), or one map by name."
        ),
    ] = "auto",
    model: ModelParam = DEFAULT_ROLE,
    timeout: Timeout = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    save: Annotated[bool, Field(description="Store it under name; false only measures.")] = True,
    store: Annotated[
        CalibrationStore | None,
        Field(description="Where to store it; default: the user's calibration store."),
        Offered.python_only("a surface stores in its own user folder's calibration store"),
    ] = None,
) -> CalibrateResult:
    """Fit and (with ``name`` and ``save``) store a calibration of ``tool``'s answers to ``question``.

    ``rows`` are labelled texts (or a stored example set's name); ``state`` is the filter's
    context; ``options`` and ``none`` are classify's; ``true``/``false`` are score's outcome
    descriptions. ``method`` is ``auto`` (cross-validated) or one map by name. For ``rerank``
    the question is the query, or None when every row carries its own ``query``.
    """
    if tool not in CALIBRATED_TOOLS:
        raise InvalidInputError("tool", f"one of {', '.join(CALIBRATED_TOOLS)}", got=tool)
    if question is not None or tool != "rerank":
        question = check_instructions(question, "question")
    if name is not None:
        check_calibration_name(name, "name")
    elif save:
        raise InvalidInputError("name", "a name to store the calibration under (or save=False)")
    none = check_optional_text(none, "none")
    checked_options = None
    if tool == "classify":
        if options is None:
            raise InvalidInputError("options", "the options classify chooses among")
        checked_options = check_options(options, none)
    elif options is not None or none is not None:
        raise InvalidInputError("options", f"no options for {tool} (only classify chooses among options)")
    allowed = CHOICE_METHODS if tool == "classify" else LIKELIHOOD_METHODS
    if method != "auto" and method not in allowed:
        raise InvalidInputError("method", f"auto or one of {', '.join(allowed)}", got=method)
    checked = _check_rows(rows, tool, checked_options, none, question)
    data_hash = _data_hash(tool, question, state, checked_options, checked)
    seed = int(data_hash[:8], 16)
    inputs = {"tool": tool, "question": question, "name": name, "rows": len(checked), "data_hash": data_hash}
    async with ToolCall("calibrate", model=None, timeout=timeout, inputs=inputs) as call:
        asked = {"model": model, "timeout": timeout, "base_url": base_url, "api_key": api_key}
        with under_parent_run(call.run_id):
            if checked_options is None:
                scores, answered_by, usage = await _likelihoods(
                    tool, checked, question, state=state, true=true, false=false, **asked
                )
            else:
                result = await aclassify([row.text for row in checked], question, options, none=none, **asked)
                answered_by, usage = result.model, result.usage
                reported = [none if key == NONE_KEY and none is not None else key for key in checked_options]
                distributions = [[d.probabilities[key] for key in reported] for d in result.decisions]
        call.usage = call.usage + usage
        if "," in answered_by:
            raise InvalidInputError(
                "model", "one model answering every row", detail=f"{answered_by} answered (a failover); calibrate again"
            )
        if checked_options is None:
            labels = [int(row.answer) for row in checked]
            methods = LIKELIHOOD_METHODS if method == "auto" else (method,)
            fitted, losses, out_of_fold = choose_map(scores, labels, methods=methods, seed=seed)
            before, after = reliability(scores, labels), reliability(out_of_fold, labels)
            stored_labels: list[Any] = labels
        else:
            keys = list(checked_options)
            truth = [keys.index(row.answer) for row in checked]
            raw = np.asarray(distributions, dtype=float)
            methods = CHOICE_METHODS if method == "auto" else (method,)
            fitted, losses, out_of_fold = choose_temperature(raw, truth, methods=methods, seed=seed)
            scores = raw[np.arange(len(truth)), truth].tolist()
            before = _top_label_reliability(raw, truth)
            after = _top_label_reliability(out_of_fold, truth)
            stored_labels = [row.answer for row in checked]
        calibration = Calibration(
            name=name or "",
            tool=tool,
            model=answered_by,
            question=question,
            options=checked_options,
            data_hash=data_hash,
            created_at=timestamp(),
            map=fitted,
            scores=[float(score) for score in scores],
            labels=stored_labels,
            before=before,
            after=after,
            losses=losses,
            run_id=call.run_id,
        )
        if save:
            (store or CalibrationStore()).put(calibration)
        call.record_outputs(calibration.summary())
        return CalibrateResult(calibration, save, call.usage, call.run_id)


def _top_label_reliability(distributions: np.ndarray, truth: list[int]) -> Any:
    """A choice's reliability as its top option's probability against whether that option was right."""
    top = distributions.argmax(axis=1)
    return reliability(distributions.max(axis=1), (top == np.asarray(truth)).astype(int))


calibrate = sync_twin_of(acalibrate, "calibrate")

CALIBRATE = ToolDefinition(
    acalibrate,
    name="calibrate",
    title="Calibrate a tool on labelled rows",
    description=(
        "Fits a map from a tool's probabilities to what labelled rows show, and stores it by name for that tool, "
        "question and model.\n\n"
        f"rows are at least {MIN_ROWS} labelled texts for one question, "
        '[{"item" or "state": <text>, "answer": true|false}] (an option key for classify; for rerank a row may '
        "carry its own query, with no question), or a stored example set's name; a yes/no calibration needs "
        f"{MIN_EACH} of each answer, and about 100 rows make a map worth trusting. The tool (filter, score, rerank "
        "or classify) answers every row, then a map is picked by five-fold cross-validated log loss (identity, "
        "platt or isotonic; identity or temperature for classify). before and after give the reliability (ECE, "
        "Brier, log loss, a ten-bin table) of the model's numbers and of out-of-fold calibrated ones. Afterwards "
        "pass calibration=<name> to that tool: builtin__filter can then promise target_recall or target_precision, "
        "and builtin__classify prediction sets at a coverage. A calibration is refused for another tool, question, "
        "option set or model."
    ),
    result=CalibrateOutput,
    # It stores the calibration under its name, replacing any of that name.
    read_only=False,
    destructive=True,
    command="calibrate",
    route="/v1/calibrate",
)
