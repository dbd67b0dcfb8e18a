"""Options of the commands that take any of several tools' arguments (``decirank batch``, ``decirank calibrate``).

Each says which tool it is for, since one command line serves them all; :func:`for_tool`
names the tool in a copy's help. The tool commands themselves (``decirank rank``, ...) take
their options from the tools' definitions (:mod:`decirank.cli._commands`), not from here.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, get_args

import typer

__all__ = [
    "CalibrationOption",
    "ConfidenceOption",
    "FalseOption",
    "NoneOption",
    "OptionsOption",
    "StateOption",
    "TargetPrecisionOption",
    "TargetRecallOption",
    "TrueOption",
    "for_tool",
]

StateOption = Annotated[
    str | None, typer.Option("--state", "-s", help="filter: the context as JSON (plain text is a string).")
]
OptionsOption = Annotated[
    str | None,
    typer.Option(
        "--options",
        help="classify: the labels, as a JSON list, a JSON object of label to description, a JSON file, or a,b,c.",
    ),
]
NoneOption = Annotated[str | None, typer.Option("--none", help="classify: text of a 'none of these' option.")]
TrueOption = Annotated[str | None, typer.Option("--true", help="score: what a yes means.")]
FalseOption = Annotated[str | None, typer.Option("--false", help="score: what a no means.")]

CalibrationOption = Annotated[
    str | None,
    typer.Option(
        "--calibration",
        metavar="NAME",
        help="A calibration stored with decirank calibrate for this tool, question and model: probabilities "
        "are then calibrated.",
    ),
]
TargetRecallOption = Annotated[
    float | None,
    typer.Option(
        "--target-recall",
        help="Keep at least this share of the yes items, with --confidence; needs --calibration, whose "
        "labelled rows pick the cut-off.",
    ),
]
TargetPrecisionOption = Annotated[
    float | None,
    typer.Option(
        "--target-precision",
        help="Keep items of which at least this share are yes, with --confidence; needs --calibration.",
    ),
]
ConfidenceOption = Annotated[
    float | None, typer.Option("--confidence", help="How sure a target's promise is (default 0.9).")
]


def for_tool(tool: str, option: Any) -> Any:
    """``option`` (an ``Annotated`` option) with its help starting ``"TOOL: "``, as a many-tool command's are."""
    kind, info = get_args(option)
    named = copy.copy(info)
    named.help = f"{tool}: {info.help[:1].lower()}{info.help[1:]}"
    return Annotated[kind, named]
