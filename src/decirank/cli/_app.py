"""The ``decirank`` Typer app that every command module adds itself to."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="decirank",
    help="Rank, rerank, filter and score lists with decision models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
