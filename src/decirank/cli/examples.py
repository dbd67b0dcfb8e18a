"""``decirank examples``: named sets of labelled examples, and reading ``--examples FILE|NAME``."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from ..errors import InvalidInputError
from ..stores.examples import ExampleStore, check_examples, check_set_name
from ._app import app
from ._output import console, error_console, new_table, path_kind, print_json, print_table, read_json_list, short_text

__all__ = ["examples_value"]

examples_app = typer.Typer(
    help='Named sets of labelled examples ({"state", "answer"} per line) that --examples NAME uses.',
    no_args_is_help=True,
)
app.add_typer(examples_app, name="examples")

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The set's name.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print as JSON.")]


def _known(store: ExampleStore) -> str:
    names = store.names()
    return f"known sets: {', '.join(names)}" if names else "none stored; decirank examples add NAME FILE stores one"


def _missing(name: str, store: ExampleStore, field: str = "name") -> InvalidInputError:
    return InvalidInputError(field, "a stored example set", detail=f"no example set {name!r}; {_known(store)}")


def examples_value(value: str | None, field: str = "--examples") -> Any:
    """What ``--examples`` names: a JSON or JSON Lines file (or ``-``) as its list, else a stored set's name.

    A value that is neither an existing file nor a stored set is bad input naming both.
    """
    if value is None:
        return None
    if value == "-" or path_kind(value) is not None:
        return read_json_list(value, field)
    store = ExampleStore()
    try:
        check_set_name(value, field)
    except InvalidInputError:
        raise InvalidInputError(
            field, "a JSON or JSON Lines file of examples, or a stored example set's name", detail=f"no file {value!r}"
        ) from None
    if store.get(value) is None:
        raise InvalidInputError(
            field,
            "a JSON or JSON Lines file of examples, or a stored example set's name",
            detail=f"no file or example set {value!r}; {_known(store)}",
        )
    return value


@examples_app.command("add")
def add(
    name: NameArgument,
    source: Annotated[
        str,
        typer.Argument(
            metavar="FILE|-",
            help='A JSON array or JSON Lines file of {"state": ..., "answer": ...} or {"item": ..., "answer": ...}, '
            "or - for stdin.",
        ),
    ],
) -> None:
    """Store a file's examples under a name, replacing any set of that name."""
    check_set_name(name)
    examples = check_examples(read_json_list(source, "examples"))
    store = ExampleStore()
    count = store.put(name, examples)
    error_console.print(f"stored {count} example(s) as {name} in {store.root}", highlight=False)


@examples_app.command("ls")
def list_sets(as_json: JsonOption = False) -> None:
    """List the stored example sets."""
    listed = ExampleStore().list()
    if as_json:
        print_json([info.to_dict() for info in listed])
        return
    table = new_table("name", "examples", "updated")
    for info in listed:
        table.add_row(info.name, str(info.count), info.updated_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"))
    print_table(table)
    console.print(f"{len(listed)} set(s)", style="dim")


@examples_app.command("show")
def show(
    name: NameArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON array instead of JSON Lines.")] = False,
    table: Annotated[bool, typer.Option("--table", help="Print a table instead of JSON Lines.")] = False,
) -> None:
    """Print a set's examples as JSON Lines, the form decirank examples add reads back."""
    store = ExampleStore()
    examples = store.get(check_set_name(name))
    if examples is None:
        raise _missing(name, store)
    if as_json:
        print_json(examples)
    elif table:
        shown = new_table("answer", "state")
        for example in examples:
            shown.add_row(json.dumps(example["answer"], ensure_ascii=False), short_text(example["state"], 120))
        print_table(shown)
    else:
        sys.stdout.write("".join(json.dumps(example, ensure_ascii=False) + "\n" for example in examples))


@examples_app.command("rm")
def remove(name: NameArgument) -> None:
    """Remove a stored example set."""
    store = ExampleStore()
    if not store.remove(check_set_name(name)):
        raise _missing(name, store)
    error_console.print(f"removed example set {name}", highlight=False)
