"""``decirank rank``, ``rerank``, ``filter``, ``classify`` and ``score``: the tools on the command line.

Each command is made from its tool's definition (:func:`~decirank.cli._commands.tool_command`):
its options, their help and defaults are the tool's parameters. What is written here is how
each prints its result as a table. In every table ``#`` is the input's index (from 0), the
same number ``--json`` calls ``index``; rank and rerank call their order ``rank`` (from 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from ..tools.classify import CLASSIFY
from ..tools.filter import FILTER
from ..tools.rank import RANK
from ..tools.rerank import RERANK
from ..tools.score import SCORE
from ._app import app
from ._commands import EXIT_INTERRUPTED, interrupted_message, tells_when_interrupted, tool_command
from ._output import (
    check_base_url,
    console,
    cost_text,
    new_table,
    print_table,
    probability_bar,
    short_text,
    shown_item,
)

__all__ = [
    "BaseUrlOption",
    "EXIT_INTERRUPTED",
    "ModelOption",
    "interrupted_message",
    "print_promise",
    "tells_when_interrupted",
    "usage_line",
]

# The options of the commands not made from a tool's definition (decirank calibrate).
ModelOption = Annotated[str, typer.Option("--model", "-m", help="A role (decider) or a provider:model name.")]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url", callback=check_base_url, help="Base URL for an HTTP backend, e.g. http://127.0.0.1:8000."
    ),
]


def _calibrated_column(data: dict[str, Any]) -> bool:
    return data.get("calibration") is not None


def print_promise(promise: dict[str, Any]) -> None:
    """What a target promised: the cut-off on the model's probability, and what the labelled rows showed at it."""
    target = "recall" if "target_recall" in promise else "precision"
    level = promise[f"target_{target}"]
    cut = "every item kept" if promise["threshold"] is None else f"model probability >= {promise['threshold']:.4f}"
    console.print(
        f"promise: {target} >= {level:g} with confidence {promise['confidence']:g} on new items; cut-off: {cut}",
        highlight=False,
    )
    observed = f"recall {promise['observed_recall']:.3f}"
    if promise["observed_precision"] is not None:
        observed += f", precision {promise['observed_precision']:.3f}"
    console.print(f"on the calibration's {promise['calibration_rows']} labelled rows: {observed}", highlight=False)
    console.print(f"method: {promise['method']}", style="dim", highlight=False)
    if promise.get("note"):
        console.print(f"note: {promise['note']}", style="yellow", highlight=False)


def usage_line(data: dict[str, Any]) -> str:
    """The model, its calls and tokens, and what they cost (a model run here costs nothing)."""
    usage = data["usage"]
    cost = cost_text(usage["cost"], usage["calls"], model=data["model"])
    shown = cost if cost.startswith("free") else f"cost {cost}"
    return f"model {data['model']} · {usage['calls']} call(s) · {usage['input_tokens']} input tokens · {shown}"


def _print_notes(data: dict[str, Any], what: str) -> None:
    """The model's notes under the table: which inputs it cut short, or read as not English."""
    for note in data.get("notes", []):
        where = "query" if note["index"] is None else f"{what} {note['index']}"
        console.print(f"note: {where}: {note['kind']}: {note['message']}", style="yellow")


def render_rank(result: Any, arguments: Mapping[str, Any]) -> None:
    describe = arguments.get("describe")
    table = new_table("rank", "#", "probability", "", "item")
    for position, entry in enumerate(result.ranked, start=1):
        probability = "—" if entry.probability is None else f"{entry.probability:.3f}"
        table.add_row(
            str(position),
            str(entry.index),
            probability,
            probability_bar(entry.probability),
            shown_item(entry.item, describe),
        )
    print_table(table)
    if result.none is not None:
        verdict = "nothing fits" if result.no_fit else "an item fits"
        console.print(f"none: {result.none:.3f} ({verdict})")
    console.print(usage_line(result.to_dict()), style="dim")


def render_rerank(result: Any, arguments: Mapping[str, Any]) -> None:
    data = result.to_dict()
    table = new_table("rank", "#", "relevance", "", "id", "document")
    describe = arguments.get("describe")
    for entry in result.results:
        document = entry.document
        if describe is not None or not isinstance(document, dict):
            text = shown_item(document, describe)
        else:
            text = short_text(document.get("text", ""))
        score = entry.relevance_score
        table.add_row(
            str(entry.rank), str(entry.index), f"{score:.3f}", probability_bar(score), str(entry.id), text
        )
    print_table(table)
    _print_notes(data, "document")
    if result.calibration is not None:
        console.print(f"relevance calibrated by {result.calibration}", highlight=False)
    console.print(usage_line(data), style="dim")


def render_filter(result: Any, arguments: Mapping[str, Any]) -> None:
    data = result.to_dict()
    describe = arguments.get("describe")
    calibrated = _calibrated_column(data)
    table = new_table("#", "kept", "probability", *(["raw"] if calibrated else []), "", "item")
    for decision in data["decisions"]:
        table.add_row(
            str(decision["index"]),
            "yes" if decision["kept"] else "no",
            f"{decision['probability']:.3f}",
            *([f"{decision['raw_probability']:.3f}"] if calibrated else []),
            probability_bar(decision["probability"]),
            shown_item(decision["item"], describe),
        )
    print_table(table)
    _print_notes(data, "item")
    if data["promise"] is not None:
        print_promise(data["promise"])
        by = "the promise's cut-off"
    else:
        by = f"min confidence {result.min_confidence:g}"
    if calibrated:
        by += f", calibrated by {data['calibration']}"
    console.print(f"kept {data['count']}, dropped {data['dropped_count']} ({by})", highlight=False)
    console.print(usage_line(data), style="dim")


def render_classify(result: Any, arguments: Mapping[str, Any]) -> None:
    data = result.to_dict()
    given = arguments["texts"]
    sets = data["coverage"] is not None
    table = new_table("#", "choice", "probability", "", *(["set"] if sets else []), "text")
    for decision in result.decisions:
        probability = decision.probability
        shown_set = []
        if sets:
            members = ", ".join(decision.prediction_set or []) or "(empty)"
            shown_set = [members + (" · none fits" if decision.none_fits else "")]
        table.add_row(
            str(decision.index),
            decision.choice,
            f"{probability:.3f}",
            probability_bar(probability),
            *shown_set,
            shown_item(given[decision.index], arguments.get("describe")),
        )
    print_table(table)
    if sets:
        found = data["coverage"]
        mean = "—" if found["mean_set_size"] is None else f"{found['mean_set_size']:.2f}"
        console.print(
            f"prediction sets hold the right option for at least {found['coverage']:g} of new texts, "
            f"with confidence {found['confidence']:g} ({found['calibration_rows']} labelled rows; mean set size {mean})",
            highlight=False,
        )
    if data["calibration"] is not None:
        console.print(f"probabilities calibrated by {data['calibration']}", highlight=False)
    console.print(usage_line(data), style="dim")


def _print_levels(levels: list[Any], given: list[Any], describe: str | None) -> None:
    """score with levels: each text's most likely level, and its expected level (0 the lowest) with a bar."""
    table = new_table("#", "level", "expected", "", "text")
    for decision in levels:
        highest = max(len(decision.probabilities) - 1, 1)
        table.add_row(
            str(decision.index),
            decision.level,
            f"{decision.expected_level:.2f}",
            probability_bar(decision.expected_level / highest),
            shown_item(given[decision.index], describe),
        )
    print_table(table)


def render_score(result: Any, arguments: Mapping[str, Any]) -> None:
    data = result.to_dict()
    given, describe = arguments["texts"], arguments.get("describe")
    calibrated = _calibrated_column(data)
    if result.levels is not None:
        _print_levels(result.levels, given, describe)
    else:
        table = new_table("#", "probability", *(["raw"] if calibrated else []), "", "text")
        rows = zip(given, data["probabilities"], data["raw_probabilities"], strict=True)
        for index, (text, probability, raw) in enumerate(rows):
            raw_cell = [f"{raw:.3f}"] if calibrated else []
            shown = shown_item(text, describe)
            table.add_row(str(index), f"{probability:.3f}", *raw_cell, probability_bar(probability), shown)
        print_table(table)
    _print_notes(data, "text")
    if calibrated:
        console.print(f"probabilities calibrated by {data['calibration']}", highlight=False)
    console.print(usage_line(data), style="dim")


for _definition, _render in (
    (RANK, render_rank),
    (RERANK, render_rerank),
    (FILTER, render_filter),
    (CLASSIFY, render_classify),
    (SCORE, render_score),
):
    app.command(name=_definition.command)(tool_command(_definition, _render))
