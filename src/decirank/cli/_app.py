"""The ``decirank`` Typer app that every command module adds itself to."""

from __future__ import annotations

from typing import Annotated

import typer

from .._version import __version__

app = typer.Typer(
    name="decirank",
    help="Rank, rerank, filter and score lists with decision models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # -h as well as --help, on every command, as most command lines take it.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"decirank {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print decirank's version and exit."),
    ] = False,
) -> None:
    """Rank, rerank, filter and score lists with decision models."""
