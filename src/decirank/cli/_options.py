"""Options of the commands that take any of several tools' arguments (``decirank batch``, ``decirank calibrate``).

Each says which tool it is for, since one command line serves them all.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["FalseOption", "NoneOption", "OptionsOption", "StateOption", "TrueOption"]

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
