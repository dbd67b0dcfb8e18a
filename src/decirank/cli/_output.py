"""Reading command input and writing human tables or JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import InvalidInputError

console = Console()
error_console = Console(stderr=True)

__all__ = [
    "console",
    "error_console",
    "parse_json_option",
    "print_json",
    "probability_bar",
    "read_json_list",
    "short_text",
]


def read_json_list(source: str, field: str) -> list[Any]:
    """A JSON array file, a JSON Lines file, or ``-`` for standard input."""
    if source == "-":
        text = sys.stdin.read()
    else:
        path = Path(source)
        if not path.is_file():
            raise InvalidInputError(field, "a JSON or JSON Lines file, or - for standard input", detail=f"no file {source!r}")
        text = path.read_text(encoding="utf-8")
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


def parse_json_option(value: str | None, field: str, *, plain_text_ok: bool = True) -> Any:
    """A JSON value given on the command line; plain text is taken as a string."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        if plain_text_ok:
            return value
        raise InvalidInputError(field, "a JSON value", got=value) from None


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


def new_table(*columns: str) -> Table:
    table = Table(show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table
