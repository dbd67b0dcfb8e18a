"""A tool's command made from its definition: options, help and defaults read off the tool's signature.

Each parameter the definition offers on ``cli`` becomes an option named by its ``Cli`` marker's
flags (else ``--name-with-dashes``), with the Field's help and the signature's default; the
``argument=True`` one becomes the positional argument. A ``read`` marker names a reader here
that turns the option's text into the value (a file of items, JSON or plain text, labels, ...),
as the tools know nothing of files and terminals. The command adds only what a command line
needs besides: ``--json``, and ``--format`` where it reads a file of items.

The command calls the tool with the options given, by their Python names, so the tool's own
defaults hold for the rest, and hands the result to the tool's ``render`` to print.
So a parameter added to a tool is an option here with no edit.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args, get_origin

import typer

from .._sync import run_sync
from ..stores.runlog import current_runlog
from ..tools._definition import Parameter, ToolDefinition, plain_type
from ._output import (
    check_base_url,
    error_console,
    FormatOption,
    json_or_text,
    names_options_in_errors,
    options_value,
    print_json,
    read_items,
)

__all__ = ["EXIT_INTERRUPTED", "READERS", "Reader", "interrupted_message", "tells_when_interrupted", "tool_command"]

#: The exit status of a command stopped by Ctrl-C (128 + SIGINT), as batch's.
EXIT_INTERRUPTED = 130

#: What a tool command prints: its result (``--json`` aside) and the arguments the tool was called with.
Render = Callable[[Any, Mapping[str, Any]], None]


def _examples(value: str, flag: str) -> Any:
    from .examples import examples_value  # here: the example store is only opened when --examples is given

    return examples_value(value, flag)


@dataclass(frozen=True)
class Reader:
    """How an option's text becomes a parameter's value: ``read(text, flag)``, or a typer ``callback``.

    ``help`` is added to the parameter's own help, to say what the command line takes.
    """

    help: str
    read: Callable[[str, str], Any] | None = None
    callback: Callable[[Any], Any] | None = None


#: The readers a ``Cli(read=...)`` marker names.
READERS: dict[str, Reader] = {
    # The items are read in the body, not by a callback: --format, another option, says how.
    "items": Reader(
        "Read from a file of JSON, JSON Lines, CSV, Parquet or text (one item per line), or - for standard input; "
        "--format says which when the name does not."
    ),
    "json_or_text": Reader("Given as JSON; text that is not JSON is a string.", read=json_or_text),
    "examples": Reader(
        "Given as a JSON or JSON Lines file of them, - for standard input, or a set stored with decirank examples add.",
        read=_examples,
    ),
    "options": Reader("Given as a JSON list, a JSON object, a JSON file holding one, or a,b,c.", read=options_value),
    # Ordered labels (score's levels): a list is what options_value reads, in the order given.
    "labels": Reader("Given as a,b,c, a JSON list, or a JSON file holding one.", read=options_value),
    # A callback, so that the parser refuses a bad URL by the option's name before the tool runs.
    "base_url": Reader("", callback=check_base_url),
}

#: The Python types an option can hold; a parameter of a wider type needs a reader.
_OPTION_TYPES = (bool, int, float, str)


def interrupted_message(tool: str, since: datetime) -> str:
    """What a Ctrl-C stopped, and what the run log recorded of it (the run a tool call started after ``since``)."""
    runlog = current_runlog()
    if runlog is None:
        return f"interrupted: {tool} was cancelled; the run log is off, so nothing was recorded"
    newest = runlog.runs(limit=1, tool=tool)
    if not newest or datetime.fromisoformat(newest[0]["started_at"]) < since:
        return f"interrupted: {tool} was cancelled before it asked a model; the run log recorded nothing"
    run = runlog.run(newest[0]["id"])
    answered = sum(child["status"] == "success" for child in run["children"])
    short = run["id"][:12]
    return (
        f"interrupted: {tool} was cancelled after {answered} of its model calls had answered; the run log recorded "
        f"run {short} as {run['status']} (decirank runs show {short})"
    )


def tells_when_interrupted(tool: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A tool command that, on Ctrl-C, says what was interrupted and what the run log recorded, then exits 130.

    Its bad input is reported by the option's name (``--min-confidence``), not the Python argument's.

    Typer turns a KeyboardInterrupt into a silent exit 130 before decirank's own handler sees it,
    so the command catches it itself.
    """

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        named = names_options_in_errors(command)

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> None:
            since = datetime.now(UTC)
            try:
                named(*args, **kwargs)
            except KeyboardInterrupt:
                error_console.print(interrupted_message(tool, since), highlight=False, soft_wrap=True)
                raise typer.Exit(EXIT_INTERRUPTED) from None

        return run

    return decorate


def flags(parameter: Parameter) -> tuple[str, ...]:
    """The option's names: its ``Cli`` marker's, else ``--name-with-dashes``."""
    return parameter.cli.flags or (f"--{parameter.name.replace('_', '-')}",)


def _members(annotation: Any) -> list[Any]:
    """The types of a union but None (``int | None`` is ``[int]``); a type that is no union alone."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return [member for member in get_args(annotation) if member is not type(None)]
    return [annotation]


def option_type(parameter: Parameter) -> Any:
    """The type typer parses the option's text as: the text itself where a reader reads it, else the
    parameter's own (a Literal's values as choices). In a union the option takes the plainest type
    ("auto" or seconds: seconds; a name or a loaded object: the name), the rest being Python's only.
    """
    if parameter.cli.read is not None:
        return str
    members = _members(plain_type(parameter.annotation))
    for kind in _OPTION_TYPES:
        if kind in members:
            return kind
    literals = [member for member in members if get_origin(member) is Literal]
    if literals:
        return Literal[tuple(value for literal in literals for value in get_args(literal))]  # type: ignore[misc]
    raise TypeError(
        f"{parameter.name}: the command line cannot read {parameter.annotation!r}; give it a Cli(read=...) marker"
    )


def _help(parameter: Parameter) -> str:
    """The Field's help, with what the command line takes where a reader reads it.

    A Field written for plans says the list is "usually a template like {{E1.items}}": on the
    command line there are no templates, so that clause is left out.
    """
    text = re.sub(r",? usually a template like \{\{[^}]*\}\}", "", parameter.help).strip()
    reader = READERS[parameter.cli.read] if parameter.cli.read else None
    if reader is not None and reader.help:
        text = f"{text.rstrip('.')}. {reader.help}" if text else reader.help
    return text


def _default(parameter: Parameter, kind: Any) -> Any:
    """The option's default: the tool's own where the option can hold it (``decider``, 16), which
    ``--help`` then shows; else None, which the command does not pass on, so the tool's holds
    (rerank's ``"auto"`` timeout)."""
    default = parameter.default
    if kind in _OPTION_TYPES and isinstance(default, kind) and (kind is bool or not isinstance(default, bool)):
        return default
    return None


def _option(parameter: Parameter) -> inspect.Parameter:
    """The typer parameter for one of the tool's parameters."""
    kind = option_type(parameter)
    reader = READERS[parameter.cli.read] if parameter.cli.read else None
    callback = reader.callback if reader is not None else None
    if parameter.cli.argument:
        info = typer.Argument(
            metavar=parameter.cli.metavar or parameter.name.upper(),
            help=_help(parameter),
            show_default=False,
            callback=callback,
        )
        return inspect.Parameter(
            parameter.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=info, annotation=kind
        )
    default = ... if parameter.required else _default(parameter, kind)
    info = typer.Option(
        default,
        *flags(parameter),
        metavar=parameter.cli.metavar,
        help=_help(parameter),
        show_default=default is not None and default is not ...,
        callback=callback,
    )
    annotation = kind if default is not None else kind | None
    return inspect.Parameter(parameter.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def _own_options(definition: ToolDefinition) -> list[inspect.Parameter]:
    """The options a command line adds to the tool's: ``--format`` where it reads items, and ``--json``."""
    own = []
    if any(parameter.cli.read == "items" for parameter in definition.offered("cli")):
        own.append(
            inspect.Parameter(
                "input_format", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=FormatOption
            )
        )
    own.append(
        inspect.Parameter(
            "as_json",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(False, "--json", help="Print the result as JSON."),
            annotation=bool,
        )
    )
    return own


def tool_arguments(definition: ToolDefinition, given: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's arguments from the command's: each option given, read by its reader; none for the rest."""
    arguments: dict[str, Any] = {}
    input_format = given.get("input_format")
    for parameter in definition.offered("cli"):
        value = given.get(parameter.name)
        if value is None:
            continue  # not given: the tool's own default
        read = parameter.cli.read
        if read == "items":
            arguments[parameter.name] = read_items(value, parameter.name, input_format)
        elif read is not None and READERS[read].read is not None:
            arguments[parameter.name] = READERS[read].read(value, max(flags(parameter), key=len))
        else:
            arguments[parameter.name] = value
    # The command line draws a bar on a terminal by itself (off one, the tool draws nothing).
    if any(parameter.name == "show_progress" for parameter in definition.parameters):
        arguments["show_progress"] = True
    return arguments


def tool_command(definition: ToolDefinition, render: Render) -> Callable[..., None]:
    """The command of ``definition``'s tool; register it with ``app.command(name=definition.command)``.

    Its help is the first paragraph of the tool's description.
    """

    def command(**given: Any) -> None:
        arguments = tool_arguments(definition, given)
        result = run_sync(definition.function, **arguments)
        if given["as_json"]:
            print_json(result.to_dict())
            return
        render(result, arguments)

    parameters = [_option(parameter) for parameter in definition.offered("cli")]
    # The positional argument first, as ``--help`` lists it; then the tool's options in its order.
    parameters.sort(key=lambda parameter: parameter.kind)
    command.__signature__ = inspect.Signature([*parameters, *_own_options(definition)])  # type: ignore[attr-defined]
    command.__name__ = command.__qualname__ = f"{definition.name}_command"
    command.__doc__ = definition.description.split("\n\n")[0]
    return tells_when_interrupted(definition.name)(command)
