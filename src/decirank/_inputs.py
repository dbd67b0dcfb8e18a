"""Lists and rows from files: JSON, JSON Lines, CSV, Parquet and plain text, one item per line.

The one reader of input files. The tool commands read a whole list with :func:`read_items`;
``decirank batch`` streams rows (batching/files.py) through the same parsers: :func:`json_lines`,
:func:`csv_records` and :func:`parquet_rows`. A format is given, or told from the file's
extension (:data:`SUFFIXES`), or, for standard input and other names, from the content
(:func:`sniff_format`).

Kept light (no typer, no batching): the command line and the batch driver both import it.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import math
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from ._jsonpath import JsonProblem, loads_json
from .errors import InvalidInputError, MissingAssetError

__all__ = [
    "ANY_FORMAT",
    "FORMATS",
    "PARQUET_ROWS",
    "SUFFIXES",
    "count_csv_records",
    "csv_columns",
    "csv_records",
    "format_of_name",
    "json_lines",
    "open_csv",
    "parquet_rows",
    "path_kind",
    "pyarrow",
    "read_bytes",
    "read_items",
    "sniff_format",
    "source_name",
]

#: Every format :func:`read_items` reads, as ``--format`` names them.
FORMATS = ("json", "jsonl", "csv", "parquet", "text")

#: The format a file's extension (lower-cased) says.
SUFFIXES = {
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".txt": "text",
}

#: What each format is, as an error says what it expected.
_NAMES = {
    "json": "a JSON array",
    "jsonl": "JSON Lines",
    "csv": "a CSV file with a header row",
    "parquet": "a Parquet file",
    "text": "text, one item per line",
}

#: What a source is expected to be when no format is given. It opens as it always has, so the
#: messages that name JSON and JSON Lines still read the same.
ANY_FORMAT = "a JSON or JSON Lines file, a CSV, Parquet or text file, or - for standard input"

PARQUET_ROWS = 4096
_PARQUET_MAGIC = b"PAR1"
_CSV_FIELD_LIMIT = 1 << 30


def source_name(source: str) -> str:
    """How an error names ``source``: ``standard input`` for ``-``, else the file name quoted."""
    return "standard input" if source == "-" else repr(source)


def path_kind(source: str) -> str | None:
    """``"file"`` for a regular file, ``"other"`` for anything else there (a named pipe, a folder,
    a device), None for nothing, or for a name no file can have (too long, say)."""
    try:
        mode = os.stat(source).st_mode
    except (OSError, ValueError):
        return None
    return "file" if stat.S_ISREG(mode) else "other"


def read_bytes(source: str, field: str, expected: str) -> bytes:
    """The bytes of the file ``source``, or of standard input for ``-``.

    A missing or unreadable file is bad input for ``field``, which should be ``expected``.
    Only regular files are read: a named pipe with no writer would block forever, and a
    device may never end.
    """
    if source == "-":
        return sys.stdin.buffer.read()
    kind = path_kind(source)
    if kind != "file":
        detail = f"{source!r} is not a regular file" if kind else f"no file {source!r}"
        raise InvalidInputError(field, expected, detail=detail)
    try:
        return Path(source).read_bytes()
    except OSError as error:
        detail = f"cannot read {source!r}: {error.strerror or error}"
        raise InvalidInputError(field, expected, detail=detail) from None


def pyarrow() -> Any:
    """pyarrow with its Parquet module, which only the ``batch`` extra installs."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise MissingAssetError("Parquet support (pyarrow)", "pip install 'decirank[batch]'") from None
    return pyarrow


# -- the parsers, shared with decirank batch ------------------------------------------------------


def json_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, str, Any]]:
    """Each non-blank line as ``(its number from 1, its text, its JSON value)``.

    In place of the value, the :class:`UnicodeDecodeError` or :class:`JsonProblem` that kept the
    line from being read, so a caller can skip one bad row (batch) or stop at it (a tool's list).
    Lines end at ``\\n`` only: JSON text may hold U+2028, which ``str.splitlines`` would split at.
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as error:
            yield number, line.decode("utf-8", "replace").rstrip("\r\n"), error
            continue
        try:
            yield number, text.rstrip("\r\n"), loads_json(text)
        except JsonProblem as problem:
            yield number, text.rstrip("\r\n"), problem


def open_csv(path: str | os.PathLike[str]) -> TextIO:
    """A CSV file opened to read: a byte-order mark is dropped, and bytes that are not UTF-8 become
    lone surrogates, so such a record fails alone (batch) rather than the whole file."""
    return open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")


def _csv_reader(file: TextIO) -> csv.DictReader:
    csv.field_size_limit(_CSV_FIELD_LIMIT)  # a long document in one cell is still one cell
    return csv.DictReader(file)


def csv_columns(file: TextIO) -> list[str]:
    """The header's columns; none for an empty file."""
    return list(_csv_reader(file).fieldnames or [])


def csv_records(file: TextIO) -> Iterator[tuple[dict[str, Any], int]]:
    """Each record keyed by the header, and how many fields it has beyond the header (0 if none).

    Values stay text: a CSV cell has no type. A record short of fields has ``""`` for the rest.
    """
    for record in _csv_reader(file):
        extra = record.pop(None, None)  # type: ignore[call-overload]
        if extra is not None:
            yield dict(record), len(extra)
        else:
            yield {key: ("" if value is None else value) for key, value in record.items()}, 0


def count_csv_records(file: TextIO) -> int:
    return sum(1 for _ in _csv_reader(file))


def parquet_rows(source: Any) -> Iterator[dict[str, Any]]:
    """Each row of a Parquet file (a path or a binary file object) as column -> value, in order."""
    parquet = pyarrow().parquet.ParquetFile(source)
    for record_batch in parquet.iter_batches(batch_size=PARQUET_ROWS):
        yield from record_batch.to_pylist()


# -- a whole list, for the tool commands -----------------------------------------------------------


def format_of_name(name: str) -> str | None:
    """The format a file name's extension says, or None."""
    return SUFFIXES.get(Path(name).suffix.lower())


def sniff_format(data: bytes) -> str:
    """The format of content with no name to go by (standard input, an unknown extension).

    Parquet by its magic bytes; ``[`` first is a JSON array; ``{`` first is JSON Lines (of
    objects: a bad line there is a mistake to report, not a text item); content whose every
    line is JSON is JSON Lines (so lines of JSON strings work); anything else is text.
    """
    if data.startswith(_PARQUET_MAGIC):
        return "parquet"
    head = data.decode("utf-8", "replace").lstrip("\ufeff").lstrip()[:1]
    if head == "[":
        return "json"
    if head == "{":
        return "jsonl"
    for _number, _text, value in json_lines(io.BytesIO(data)):
        if isinstance(value, UnicodeDecodeError) or (isinstance(value, JsonProblem) and value.syntax):
            return "text"
    return "jsonl"


def _check_format(format: str) -> str:
    if format not in FORMATS:
        raise InvalidInputError("--format", f"one of {', '.join(FORMATS)}", detail=f"got {format!r}")
    return format


def _text(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInputError(field, "UTF-8 text", detail=f"byte {error.start} is not UTF-8") from None


def _bad_json(field: str, expected: str, problem: JsonProblem, name: str) -> InvalidInputError:
    where = problem.where()
    detail = f"{name}, {where}{problem.problem}" if where else f"{name}: {problem.problem}"
    return InvalidInputError(field, expected, detail=detail)


def _json_array(text: str, field: str, name: str) -> list[Any]:
    try:
        value = loads_json(text)
    except JsonProblem as problem:
        raise _bad_json(field, _NAMES["json"], problem, name) from None
    if not isinstance(value, list):
        kind = "object" if isinstance(value, dict) else "string" if isinstance(value, str) else "value"
        raise InvalidInputError(field, _NAMES["json"], detail=f"{name} holds a JSON {kind}")
    return value


def _json_lines(data: bytes, field: str, name: str) -> list[Any]:
    values = []
    for number, _text, value in json_lines(io.BytesIO(data)):
        if isinstance(value, UnicodeDecodeError):
            detail = f"{name}, line {number}: byte {value.start} is not UTF-8"
            raise InvalidInputError(field, "UTF-8 text", detail=detail)
        if isinstance(value, JsonProblem):
            value.line = number
            raise _bad_json(field, "a JSON array or JSON Lines", value, name)
        values.append(value)
    return values


def _csv_items(text: str, field: str, name: str) -> list[dict[str, Any]]:
    items = []
    for index, (record, extra) in enumerate(csv_records(io.StringIO(text, newline=""))):
        if extra:
            detail = f"{name}: record {index + 1} has {extra} more field(s) than the header"
            raise InvalidInputError(field, _NAMES["csv"], detail=detail)
        items.append(record)
    return items


def _plain(value: Any) -> Any:
    """A Parquet value as JSON can carry it: times and decimals as their text, a float that is not
    finite (how some writers mark a missing value) as None, bytes as UTF-8 text."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | datetime.timedelta):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8")  # not UTF-8: the caller says which value
    return value


def _parquet_items(data: bytes, field: str, name: str) -> list[dict[str, Any]]:
    try:
        rows = list(parquet_rows(io.BytesIO(data)))
    except MissingAssetError:
        raise
    except Exception as error:  # pyarrow's errors are its own
        raise InvalidInputError(field, _NAMES["parquet"], detail=f"{name}: {error}") from None
    items = []
    for index, row in enumerate(rows):
        try:
            items.append(_plain(row))
        except UnicodeDecodeError:
            detail = f"{name}: row {index} holds bytes that are not UTF-8"
            raise InvalidInputError(field, _NAMES["parquet"], detail=detail) from None
    return items


def _text_items(text: str) -> list[str]:
    # Lines end at "\n" (and "\r\n"); a line of only blanks is no item.
    return [line.removesuffix("\r") for line in text.split("\n") if line.strip()]


def read_items(source: str, field: str, format: str | None = None) -> list[Any]:
    """The list in the file ``source``, or on standard input for ``-``, bad input for ``field`` if not.

    ``format`` is one of :data:`FORMATS`; None tells it from the file's extension, else from
    the content (:func:`sniff_format`). A JSON array's and JSON Lines' items are as given;
    CSV and Parquet rows are objects keyed by column (CSV values stay text), so a ``describe``
    dot path picks a column; text gives each non-blank line as a string.
    """
    if format is not None:
        format = _check_format(format)
    expected = ANY_FORMAT if format is None else f"{_NAMES[format]}, or - for standard input"
    data = read_bytes(source, field, expected).removeprefix(b"\xef\xbb\xbf")  # a byte-order mark is no item
    name = source_name(source)
    by_name = None if format is not None or source == "-" else format_of_name(source)
    if by_name == "json" and not data.lstrip().startswith(b"["):
        by_name = "jsonl"  # a .json file of JSON Lines has always been read as such
    fmt = format or by_name or sniff_format(data)
    if fmt == "parquet":
        return _parquet_items(data, field, name)
    text = _text(data, field)  # every text format is UTF-8, checked whole before any line is read
    if fmt == "jsonl":
        return _json_lines(data, field, name)
    if fmt == "json":
        return _json_array(text.strip(), field, name)
    if fmt == "csv":
        return _csv_items(text, field, name)
    return _text_items(text)
