"""A stored calibration as a tool uses it: looked up, checked against the call, applied.

A calibration is refused, with an :class:`~decirank.errors.InvalidInputError`
naming ``calibration``, when it was fitted for another tool, question,
option set or model: its numbers would not mean what they say. The model is
checked twice: the role's first model before any model call, and the model
that answered after (a failover to another model answers on another scale).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..calibration._guarantees import Cutoff, precision_cutoff, recall_cutoff
from ..decisions.decider import Decider
from ..decisions.toolcall import ToolCall
from ..errors import InvalidInputError
from ..stores.calibrations import Calibration, CalibrationStore
from ._checks import check_probability_threshold

__all__ = [
    "DEFAULT_CONFIDENCE",
    "Target",
    "calibrated",
    "check_answered",
    "check_confidence",
    "check_first_model",
    "check_model",
    "check_target",
    "cutoff_for",
    "cutoff_of",
    "load_calibration",
]

#: The confidence a promise is made with unless the caller names one.
DEFAULT_CONFIDENCE = 0.9

FIELD = "calibration"


def load_calibration(
    name: Any,
    tool: str,
    question: str | None,
    options: Mapping[str, str] | None = None,
    store: CalibrationStore | None = None,
) -> Calibration | None:
    """The calibration called ``name`` (None for none), checked against what the tool is asked.

    ``name`` may be a :class:`Calibration` already loaded (``decirank batch`` hands its workers the
    one the driver loaded); it is checked the same way. ``question`` None is a rerank whose rows
    each bring their own query (a batch's ``query_field``): only a calibration for any query fits.
    """
    if name is None:
        return None
    calibration = name if isinstance(name, Calibration) else (store or CalibrationStore()).require(name, FIELD)
    name = calibration.name
    if calibration.tool != tool:
        raise InvalidInputError(
            FIELD, f"a calibration fitted for {tool}", detail=f"{name!r} was fitted for {calibration.tool}"
        )
    # A rerank calibration fitted over many queries (question None) serves any query.
    if calibration.question is not None and question is None:
        raise InvalidInputError(
            FIELD,
            "a calibration fitted for any query (each labelled row with its own), as each row brings its own",
            detail=f"{name!r} was fitted for the one query {calibration.question!r}",
        )
    if calibration.question is not None and calibration.question != question:
        raise InvalidInputError(
            FIELD,
            "a calibration fitted for this question",
            detail=f"{name!r} was fitted for {calibration.question!r}, not {question!r}",
        )
    if options is not None and calibration.options != dict(options):
        raise InvalidInputError(
            FIELD,
            "a calibration fitted for these options",
            detail=f"{name!r} was fitted for the options {sorted(calibration.options or {})}",
        )
    return calibration


def check_model(calibration: Calibration | None, call: ToolCall) -> None:
    """Refuse, before any model call, a calibration fitted for another model than the role's first."""
    if calibration is None:
        return
    assert call.decider is not None
    check_first_model(calibration, call.decider)


def check_first_model(calibration: Calibration | None, decider: Decider) -> None:
    """:func:`check_model` for a role resolved outside a tool call (a batch's driver, before its workers start)."""
    if calibration is None:
        return
    first = decider.model_names[0]
    if first != calibration.model:
        raise InvalidInputError(
            FIELD,
            f"a calibration fitted for the model {first}",
            detail=f"{calibration.name!r} was fitted for {calibration.model}; fit one for {first} with decirank calibrate",
        )


def check_answered(calibration: Calibration | None, call: ToolCall) -> None:
    """Refuse answers from another model than the calibration's (a failover): its map would not fit them."""
    if calibration is not None and call.answered_by != calibration.model:
        raise InvalidInputError(
            FIELD,
            f"answers from {calibration.model}, the model it was fitted for",
            detail=f"{call.answered_by} answered (a failover); {calibration.name!r} does not apply to its numbers",
        )


def calibrated(calibration: Calibration | None, probabilities: list[float]) -> list[float]:
    """``probabilities`` through the calibration's map (as they are without one)."""
    if calibration is None or not probabilities:
        return probabilities
    return [float(p) for p in calibration.map(probabilities)]


def check_confidence(confidence: Any) -> float:
    """How sure a promise must be: a number between 0 and 1 (exclusive), :data:`DEFAULT_CONFIDENCE` for None."""
    sure = check_probability_threshold(DEFAULT_CONFIDENCE if confidence is None else confidence, "confidence")
    assert sure is not None
    if not 0.0 < sure < 1.0:
        raise InvalidInputError("confidence", "a number between 0 and 1 (exclusive)", got=confidence)
    return sure


@dataclass(frozen=True)
class Target:
    """A checked ``target_recall`` or ``target_precision``: what a cut-off must promise, and how surely."""

    #: ``target_recall`` or ``target_precision``.
    field: str
    level: float
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {self.field: self.level, "confidence": self.confidence}


def check_target(
    calibration: Calibration | None,
    target_recall: Any,
    target_precision: Any,
    confidence: Any,
    min_confidence: float | None = None,
) -> Target | None:
    """The target asked (None for none), its arguments checked; the cut-off waits for the batch size.

    ``min_confidence`` is the caller's own cut-off, if it named one: a target picks it instead.
    """
    recall = check_probability_threshold(target_recall, "target_recall")
    precision = check_probability_threshold(target_precision, "target_precision")
    if recall is None and precision is None:
        return None
    if recall is not None and precision is not None:
        raise InvalidInputError("target_recall", "one target: target_recall or target_precision, not both")
    target_field = "target_recall" if recall is not None else "target_precision"
    level = recall if recall is not None else precision
    assert level is not None
    if not 0.0 < level < 1.0:
        raise InvalidInputError(target_field, "a number between 0 and 1 (exclusive)", got=level)
    sure = check_confidence(confidence)
    if calibration is None:
        raise InvalidInputError(
            FIELD, f"the name of a stored calibration, which {target_field} picks its cut-off from", got=None
        )
    if min_confidence is not None:
        raise InvalidInputError("min_confidence", "no min_confidence with a target: the target picks the cut-off")
    return Target(target_field, level, sure)


def cutoff_of(calibration: Calibration, target: Target, batch_size: int) -> Cutoff:
    """The cut-off on the model's probability that keeps ``target``'s promise for ``batch_size`` new items."""
    if target.field == "target_recall":
        return recall_cutoff(calibration.scores, calibration.labels, target.level, target.confidence, batch_size)
    found = precision_cutoff(calibration.scores, calibration.labels, target.level, target.confidence)
    if found is None:
        raise InvalidInputError(
            "target_precision",
            "a precision the calibration's rows can promise",
            detail=(
                f"no cut-off of {calibration.name!r} ({calibration.rows} rows) reaches precision {target.level:g} "
                f"at confidence {target.confidence:g}; label more rows or ask for less"
            ),
        )
    return found


def cutoff_for(
    calibration: Calibration | None,
    target_recall: Any,
    target_precision: Any,
    confidence: Any,
    batch_size: int,
    min_confidence: float | None = None,
) -> Cutoff | None:
    """The promised cut-off on the model's probability, when a target is asked; checked arguments.

    ``batch_size`` is how many items the cut-off is for: a recall promise holds for them too.
    """
    target = check_target(calibration, target_recall, target_precision, confidence, min_confidence)
    if target is None:
        return None
    assert calibration is not None
    return cutoff_of(calibration, target, batch_size)
