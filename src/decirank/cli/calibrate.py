"""``decirank calibrate`` (fit and store a calibration) and ``decirank calibrations`` (list, show, remove)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..errors import InvalidInputError
from ..stores.calibrations import CalibrationStore
from ..stores.calibrations import check_calibration_name
from ..tools.calibrate import CALIBRATED_TOOLS, MIN_EACH, MIN_ROWS
from ..tools.calibrate import calibrate as calibrate_rows
from ._app import app
from ._options import FalseOption, NoneOption, OptionsOption, StateOption, TrueOption
from ._output import (
    console,
    error_console,
    json_or_text,
    names_options_in_errors,
    new_table,
    options_value,
    print_json,
    print_table,
    short_text,
)
from .tools import BaseUrlOption, ModelOption, usage_line

__all__ = ["print_calibration"]

calibrations_app = typer.Typer(
    help="Stored calibrations (decirank calibrate makes them): the tools take one as --calibration NAME.",
    no_args_is_help=True,
)
app.add_typer(calibrations_app, name="calibrations")

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The calibration's name.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print as JSON.")]
METHODS = ("auto", "identity", "platt", "isotonic", "temperature")


def _known(store: CalibrationStore) -> str:
    names = store.names()
    return f"known: {', '.join(names)}" if names else "none stored; decirank calibrate NAME ROWS stores one"


def _missing(name: str, store: CalibrationStore) -> InvalidInputError:
    return InvalidInputError("name", "a stored calibration", detail=f"no calibration {name!r}; {_known(store)}")


def _number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def print_calibration(summary: dict[str, Any]) -> None:
    """A calibration as people read it: what it is for, the reliability table before and after, the scores."""
    bins: dict[tuple[float, float], dict[str, Any]] = {}
    for when in ("before", "after"):
        for entry in summary[when]["table"]:
            bins.setdefault((entry["low"], entry["high"]), {})[when] = entry
    table = new_table("bin", "rows", "mean p", "frequency", "rows after", "mean p after", "frequency after", wrap=())
    for (low, high), found in sorted(bins.items()):
        cells = [f"{low:.1f}-{high:.1f}"]
        for when in ("before", "after"):
            entry = found.get(when)
            if entry is None:
                cells += ["0", "—", "—"]
            else:
                cells += [str(entry["rows"]), _number(entry["mean_probability"]), _number(entry["frequency"])]
        table.add_row(*cells)
    print_table(table)
    before, after = summary["before"], summary["after"]
    console.print(f"ECE    {before['ece']:.4f} -> {after['ece']:.4f}")
    console.print(f"Brier  {before['brier']:.4f} -> {after['brier']:.4f}")
    losses = ", ".join(f"{method} {loss:.4f}" for method, loss in summary["cross_validated_log_loss"].items())
    console.print(f"method {summary['method']} (cross-validated log loss: {losses})")
    rows = f"{summary['rows']} rows"
    if summary.get("positives") is not None:
        rows += f", {summary['positives']} yes"
    question = "any query (each row's own)" if summary["question"] is None else repr(summary["question"])
    console.print(
        f"{summary['name'] or '(not stored)'}: {summary['tool']} of {summary['model']} on {question} ({rows})",
        highlight=False,
    )
    console.print("after: out-of-fold calibrated probabilities, so no row judges a map fitted on it", style="dim")


CALIBRATE_HELP = (
    "Fit a map from a tool's probabilities to labelled rows' answers and store it as NAME.\n\n"
    f"At least {MIN_ROWS} rows ({MIN_EACH} of each answer for yes/no); about 100 make a map worth trusting. "
    "Prints the reliability before (the model's numbers) and after (calibrated, out of fold); the tools then "
    "take --calibration NAME."
)


@app.command(help=CALIBRATE_HELP)
@names_options_in_errors
def calibrate(
    name: NameArgument,
    rows: Annotated[
        str,
        typer.Argument(
            metavar="ROWS",
            help='Labelled rows: a JSON array or JSON Lines file of {"item" (or "state"): <text>, "answer": '
            "true/false} (classify: an option key), - for stdin, or a set stored with decirank examples add.",
        ),
    ],
    question: Annotated[
        str | None,
        typer.Option(
            "--question", "-q", help="The question the tool asks (rerank: the query; none when rows carry a query)."
        ),
    ] = None,
    tool: Annotated[
        str, typer.Option("--tool", "-t", help=f"The tool to calibrate: {', '.join(CALIBRATED_TOOLS)}.")
    ] = "filter",
    state: StateOption = None,
    options: OptionsOption = None,
    none: NoneOption = None,
    true: TrueOption = None,
    false: FalseOption = None,
    method: Annotated[
        str,
        typer.Option("--method", help=f"auto (by cross-validated log loss) or one of {', '.join(METHODS[1:])}."),
    ] = "auto",
    save: Annotated[bool, typer.Option("--save/--no-save", help="Store it under NAME, or only measure.")] = True,
    model: ModelOption = "decider",
    base_url: BaseUrlOption = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Time budget in seconds for the model calls.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Fit a map from a tool's probabilities to labelled rows' answers and store it as NAME (help: CALIBRATE_HELP)."""
    from .examples import examples_value

    check_calibration_name(name)
    result = calibrate_rows(
        examples_value(rows, "rows"),
        question,
        name=name,
        tool=tool,
        state=None if state is None else json_or_text(state, "--state"),
        options=options_value(options),
        none=none,
        true=true,
        false=false,
        method=method,
        model=model,
        base_url=base_url,
        timeout=timeout,
        save=save,
    )
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    print_calibration(data)
    console.print(usage_line(data), style="dim")
    if result.saved:
        error_console.print(f"stored calibration {name}; use it with --calibration {name}", highlight=False)


@calibrations_app.command("list")
def list_calibrations(as_json: JsonOption = False) -> None:
    """List the stored calibrations."""
    listed = CalibrationStore().list()
    if as_json:
        print_json(listed)
        return
    table = new_table("name", "tool", "model", "rows", "method", "ECE before", "ECE after", "question")
    for summary in listed:
        table.add_row(
            summary["name"],
            summary["tool"],
            summary["model"],
            str(summary["rows"]),
            summary["method"],
            f"{summary['before']['ece']:.4f}",
            f"{summary['after']['ece']:.4f}",
            "(each row's query)" if summary["question"] is None else short_text(summary["question"], 60),
        )
    print_table(table)
    console.print(f"{len(listed)} calibration(s)", style="dim")


@calibrations_app.command("show")
@names_options_in_errors
def show(name: NameArgument, as_json: JsonOption = False) -> None:
    """Show a calibration: what it was fitted for, its map, and the reliability before and after."""
    store = CalibrationStore()
    found = store.get(check_calibration_name(name))
    if found is None:
        raise _missing(name, store)
    summary = found.summary()
    if as_json:
        print_json(summary)
        return
    print_calibration(summary)


@calibrations_app.command("remove")
@names_options_in_errors
def remove(name: NameArgument) -> None:
    """Remove a stored calibration."""
    store = CalibrationStore()
    if not store.remove(check_calibration_name(name)):
        raise _missing(name, store)
    error_console.print(f"removed calibration {name}", highlight=False)
