"""Reading command input, and writing human tables, progress bars or JSON."""

from __future__ import annotations

import functools
import json
import math
import re
import shlex
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._inputs import FORMATS, path_kind, read_bytes, read_items, source_name
from .._jsonpath import MISSING, JsonProblem, find_non_text, loads_json, resolve_dot_path
from ..errors import InvalidInputError

try:  # Typer ships its own copy of Click; the context of a running command is that copy's.
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover
    from click import get_current_context


def _console(*, stderr: bool) -> Console:
    # Markup is off: what these print is the user's data ("[/path]" is text, not a closing tag).
    made = Console(stderr=stderr, markup=False)
    # Piped or redirected, a line goes out whole: hard-wrapped at rich's 80 columns it would break logs and grep.
    made.soft_wrap = not made.is_terminal
    return made


def runs_here(model: str | None) -> bool:
    """Whether ``model`` (a ``provider:model`` name, or several joined by ", " after a failover) runs in
    this process, every one of them: its provider takes no ``base_url``, as a model served elsewhere would."""
    if not model:
        return False
    from ..backends import providers  # here: only a summary line asks, once

    local = {found.name for found in providers() if "base_url" not in found.options}
    return all(name.strip().partition(":")[0] in local for name in model.split(","))


def cost_text(cost: float | None, calls: int, *, model: str | None = None) -> str:
    """A run's cost as the summaries print it: no model call costs nothing, not an unknown amount.

    A model that runs here (``model``, the one that answered) is free, which "$0.000000" would
    only hint at, as if a price had been looked up and rounded.
    """
    if runs_here(model) and not cost:
        return "free (local model)"
    if cost is None:
        return "$0.000000" if calls == 0 else "unknown"
    return f"${cost:.6f}"


console = _console(stderr=False)
error_console = _console(stderr=True)

__all__ = [
    "FORMATS",
    "FormatOption",
    "bad_json",
    "check_base_url",
    "check_host",
    "check_text",
    "console",
    "cost_text",
    "error_console",
    "format_option",
    "json_or_text",
    "new_table",
    "options_value",
    "parse_json",
    "path_kind",
    "print_json",
    "print_table",
    "probability_bar",
    "progress_bar",
    "read_items",
    "read_json_list",
    "read_text",
    "runs_here",
    "short_text",
    "shown_item",
    "source_name",
]


def read_text(source: str, field: str, expected: str) -> str:
    """The UTF-8 text of the file ``source``, or of standard input for ``-``.

    A missing or unreadable file, or bytes that are not UTF-8, are bad input for ``field``,
    which should be ``expected``. Only regular files are read: a named pipe with no writer
    would block forever, and a device may never end.
    """
    data = read_bytes(source, field, expected)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInputError(field, "UTF-8 text", detail=f"byte {error.start} is not UTF-8") from None


def bad_json(field: str, expected: str, problem: JsonProblem, source: str | None = None) -> InvalidInputError:
    """The error for JSON that ``loads_json`` refused: where (the source, line or path) and what."""
    where = problem.where()
    prefix = "" if source is None else f"{source}, " if where else f"{source}: "
    return InvalidInputError(field, expected, detail=f"{prefix}{where}{problem.problem}")


def parse_json(text: str, field: str, expected: str = "JSON", source: str | None = None) -> Any:
    """``text`` as JSON, with every protection of :func:`loads_json`; bad input for ``field`` if not."""
    try:
        return loads_json(text)
    except JsonProblem as problem:
        raise bad_json(field, expected, problem, source) from None


def check_text(value: Any, field: str, expected: str, source: str | None = None) -> Any:
    """``value`` itself, once sure it holds no lone surrogate and no float that is not finite."""
    found = find_non_text(value)
    if found is not None:
        raise bad_json(field, expected, JsonProblem(found[1], path=found[0]), source)
    return value


#: Every command's list input, by its old name: JSON, JSON Lines, CSV, Parquet or text (see ``read_items``).
read_json_list = read_items


def check_format(value: str | None) -> str | None:
    """The ``--format`` callback: one of :data:`FORMATS` (any case), or None to tell it from the input."""
    if value is None:
        return None
    if value.lower() not in FORMATS:
        raise typer.BadParameter(f"expected one of {', '.join(FORMATS)}, not {value!r}")
    return value.lower()


def format_option(help: str | None = None) -> Any:
    """The ``--format`` option of a command that reads a list with :func:`read_items`."""
    return typer.Option(
        "--format",
        metavar="|".join(FORMATS),
        callback=check_format,
        help=help
        or "The input's format; by default told from its extension (.json, .jsonl, .ndjson, .csv, .parquet, .txt), "
        "else from its content: [ opens a JSON array, lines of JSON are JSON Lines, anything else is text, "
        "one item per line. CSV and Parquet rows are objects keyed by column: pick one with --describe.",
    )


#: ``input_format: FormatOption = None``, passed on as ``read_items(items, "items", input_format)``.
FormatOption = Annotated[str | None, format_option()]


def json_or_text(value: str, field: str) -> Any:
    """A JSON value given on the command line (option ``field``); plain text that is not JSON is a string.

    Text that opens like JSON (``{``, ``[`` or ``"``) but is not JSON is refused rather than taken as
    a string: ``{question: CPU}`` is a typo far more often than a sentence. A JSON string says
    "this is text" explicitly, whatever it holds.
    """
    try:
        return loads_json(value)
    except JsonProblem as problem:
        if not problem.syntax:
            raise bad_json(field, "JSON or plain text", problem) from None
        if value.lstrip()[:1] in ("{", "[", '"'):
            quoted = shlex.quote(json.dumps(value, ensure_ascii=False))
            problem.problem += f"; to pass this text as a plain string, give it as a JSON string: {field} {quoted}"
            raise bad_json(field, "JSON (it opens like JSON but is not)", problem) from None
    # Bytes that were not UTF-8 reach argv as lone surrogates.
    return check_text(value, field, "JSON or plain text")


def options_value(value: str | None, field: str = "--options") -> Any:
    """``--options``: a JSON list or object, a JSON file holding one, or labels separated by commas."""
    if value is None:
        return None
    if path_kind(value) is not None:
        expected = "a JSON file of labels (a list, or an object of label to description)"
        return parse_json(read_text(value, field, expected), field, expected, repr(value))
    parsed = json_or_text(value, field)
    if isinstance(parsed, str):
        return [label.strip() for label in parsed.split(",") if label.strip()]
    return parsed


def check_base_url(value: str | None) -> str | None:
    """The ``--base-url`` callback: an http(s) URL with a host that HTTP clients can parse, or None."""
    if value is None:
        return None
    import httpx  # here: most commands never take a base URL, and httpx is slow to import

    problem = None
    if find_non_text(value) is not None:
        problem = "not a URL: it is not UTF-8 text"
    elif not value.lower().startswith(("http://", "https://")):
        problem = "expected an http:// or https:// URL"
    else:
        try:
            url = httpx.URL(value)
            if not url.host:
                problem = "the URL names no host"
            elif url.port is not None and not 0 < url.port <= 65535:
                problem = f"the port {url.port} is not from 1 to 65535"
        except (httpx.InvalidURL, ValueError, UnicodeError) as error:
            problem = f"not a valid URL: {error}"
    if problem is not None:
        import typer

        raise typer.BadParameter(problem)
    return value


def check_host(value: str) -> str:
    """The ``--host`` callback of the servers: an address this machine can resolve, to listen on."""
    import socket

    try:
        socket.getaddrinfo(value, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError) as error:
        import typer

        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise typer.BadParameter(f"{value!r} is not an address to listen on: {reason}") from None
    return value


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite (NaN, Infinity) as None, which JSON can say."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def print_json(data: Any) -> None:
    """``data`` as JSON on stdout: always JSON, so NaN and Infinity (which a run may have logged
    from the Python API) are null, and a lone surrogate is written as its ``\\u`` escape."""
    try:
        text = json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False)
    except ValueError:
        data = _finite(data)
        text = json.dumps(data, ensure_ascii=False, indent=2)
    if find_non_text(text) is not None:
        text = json.dumps(data, ensure_ascii=True, indent=2)
    sys.stdout.write(text + "\n")


def probability_bar(probability: float | None, width: int = 20) -> Text:
    if probability is None:
        return Text("not in final", style="dim")
    filled = round(probability * width)
    return Text("█" * filled + "·" * (width - filled), style="green")


def short_text(value: Any, limit: int = 90) -> str:
    """``value`` as one line of a table: its text (else its JSON), each run of white space one space.

    Cut to ``limit`` characters on a terminal only, where a row should fit the screen; piped or
    redirected, the text stays whole, so logs and grep see all of it.
    """
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return _cut(text, limit) if console.is_terminal else text


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_item(item: Any, describe: str | None, limit: int = 90) -> str:
    """An item as a table shows it: its ``describe`` dot path when it has one, else the whole item."""
    value = resolve_dot_path(item, describe) if describe else MISSING
    return short_text(item if value is MISSING else value, limit)


def new_table(*columns: str, wrap: Collection[str] | None = None) -> Table:
    """A table whose ``wrap`` columns (by default the last) fold long text; the others never split.

    Ids, refs, times and numbers stay whole on one line, so a run id can be copied from it;
    the free text takes what width is left.
    """
    wrapped = {columns[-1]} if wrap is None else set(wrap)
    # No vertical rules and no edge padding: the width goes to the cells, so tables fit 80 columns.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True, header_style="bold")
    for column in columns:
        if column in wrapped:
            table.add_column(column, overflow="fold", ratio=1)
        else:
            table.add_column(column, no_wrap=True)
    return table


def _plain(cell: Any) -> str:
    return " ".join((cell.plain if isinstance(cell, Text) else str(cell)).split())


def print_table(table: Table) -> None:
    """``table`` drawn on a terminal; elsewhere (a pipe, a file) as plain tab-separated lines.

    Off a terminal there is no width to fit, so nothing is folded or cut: one line per row,
    the header first, and the probability bars (columns with no header) left out.
    """
    if console.is_terminal:
        console.print(table)
        return
    shown = [column for column in table.columns if str(column.header)]
    lines = ["\t".join(_plain(column.header) for column in shown)]
    lines += ["\t".join(_plain(cell) for cell in row) for row in zip(*(column.cells for column in shown), strict=True)]
    sys.stdout.write("".join(line + "\n" for line in lines))


@contextmanager
def progress_bar(label: str, total: int, *, remaining: bool = False) -> Iterator[Callable[[], None]]:
    """A bar on stderr that vanishes when done; yields the function that moves it one step.

    Off a terminal (a pipe, a log file) it draws nothing.
    """
    # Imported here: most commands draw no bar, and rich.progress is slow to import.
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        # The label is the task's description, never the column's format: it may hold braces or
        # brackets (``exec:cat {artifact}``) that a format string or markup would try to read.
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn() if remaining else TimeElapsedColumn(),
        console=error_console,
        transient=True,
        disable=not error_console.is_terminal,
    ) as progress:
        task = progress.add_task(_cut(" ".join(label.split()), 40), total=total)  # the bar is always on a terminal
        yield lambda: progress.advance(task)


def command_line_names(aliases: Mapping[str, str] | None = None) -> dict[str, str]:
    """The running command's parameters as its user types them: ``--min-confidence``, ``ITEMS``.

    Keyed by the Python name, which is the field an :class:`~decirank.errors.InvalidInputError` names.
    ``aliases`` adds fields that a command passes on under another name (``output`` for ``--out``).
    """
    names: dict[str, str] = {}
    for param in get_current_context().command.params:
        if param.name is None:
            continue
        if param.param_type_name == "argument":
            names[param.name] = param.metavar or param.name.upper()
        else:
            names[param.name] = max(param.opts, key=len)
    for field, name in (aliases or {}).items():
        names[field] = names.get(name, name)
    return names


def as_command_line_error(error: InvalidInputError, names: Mapping[str, str]) -> InvalidInputError:
    """The same error naming command-line options rather than Python arguments.

    The field comes first (``min_confidence: expected…`` reads ``--min-confidence: expected…``);
    other parameters that what is expected names by their Python name (``target_recall``) are renamed
    too. The rest (the detail, what was given) quotes the user's input and is left as it is.
    """
    head = re.match(r"[^.\[]*", error.field).group()
    field = names[head] + error.field[len(head) :] if head in names else error.field
    compound = sorted((name for name in names if "_" in name), key=len, reverse=True)
    expected = error.expected
    if compound:  # a name of one word ("question") reads as a plain word where it is not the field
        pattern = r"\b(" + "|".join(map(re.escape, compound)) + r")\b"
        expected = re.sub(pattern, lambda match: names[match.group(1)], expected)
    renamed = InvalidInputError(field, expected, detail=error.detail)
    message, start = str(error), f"{error.field}: expected {error.expected}"
    if message.startswith(start):
        renamed.args = (f"{field}: expected {expected}{message[len(start) :]}",)
    return renamed


def names_options_in_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command whose bad input is reported by the option's name (``--min-confidence``), not the Python argument's."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except InvalidInputError as error:
            raise as_command_line_error(error, command_line_names()) from None

    return run
