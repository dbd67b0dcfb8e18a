"""Reading command input, and writing human tables, progress bars or JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._jsonpath import MISSING, resolve_dot_path
from ..errors import InvalidInputError

# Markup is off: what these print is the user's data ("[/path]" is text, not a closing tag).
console = Console(markup=False)
error_console = Console(stderr=True, markup=False)

__all__ = [
    "console",
    "error_console",
    "json_or_text",
    "new_table",
    "print_json",
    "probability_bar",
    "progress_bar",
    "read_json_list",
    "read_text",
    "short_text",
    "shown_item",
]


def read_text(source: str, field: str, expected: str) -> str:
    """The UTF-8 text of the file ``source``, or of standard input for ``-``.

    A missing or unreadable file, or bytes that are not UTF-8, are bad input for ``field``,
    which should be ``expected``.
    """
    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(source)
        if not path.is_file():
            raise InvalidInputError(field, expected, detail=f"no file {source!r}")
        try:
            data = path.read_bytes()
        except OSError as error:
            detail = f"cannot read {source!r}: {error.strerror or error}"
            raise InvalidInputError(field, expected, detail=detail) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInputError(field, "UTF-8 text", detail=f"byte {error.start} is not UTF-8") from None


def read_json_list(source: str, field: str) -> list[Any]:
    """A JSON array file, a JSON Lines file, or ``-`` for standard input."""
    text = read_text(source, field, "a JSON or JSON Lines file, or - for standard input")
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise InvalidInputError(field, "a JSON array", detail=f"line {error.lineno}: {error.msg}") from None
        return value
    values = []
    for number, line in enumerate(stripped.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise InvalidInputError(field, "a JSON array or JSON Lines", detail=f"line {number}: {error.msg}") from None
    return values


def json_or_text(value: str) -> Any:
    """A JSON value given on the command line; text that is not JSON is taken as a string."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def probability_bar(probability: float | None, width: int = 20) -> Text:
    if probability is None:
        return Text("not in final", style="dim")
    filled = round(probability * width)
    return Text("█" * filled + "·" * (width - filled), style="green")


def short_text(value: Any, limit: int = 90) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_item(item: Any, describe: str | None, limit: int = 90) -> str:
    """An item as a table shows it: its ``describe`` dot path when it has one, else the whole item."""
    value = resolve_dot_path(item, describe) if describe else MISSING
    return short_text(item if value is MISSING else value, limit)


def new_table(*columns: str) -> Table:
    table = Table(show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


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
        task = progress.add_task(short_text(label, 40), total=total)
        yield lambda: progress.advance(task)
