"""Rows in and out of JSON Lines, CSV and Parquet files, chosen by extension.

Reading gives every data row with its position (0-based, counting every row
the file holds: JSON Lines' non-blank lines, CSV's records, Parquet's rows),
so a row's number never depends on which rows could be read. A JSON Lines
line that is not a JSON object is a row with a problem and no value.

The formats, by extension, and the parsers are the tool commands' own
(``decirank._inputs``): a file reads the same whichever command is given it.

Writing is deterministic: the same rows and answers give the same bytes.
JSON Lines rows keep their keys in order and get the answer columns after
them; CSV gets the header's columns then the answers (``true``/``false``,
numbers as Python writes them, empty for none); Parquet gets the input's
schema (or one inferred from every row) plus typed answer columns.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .._inputs import (
    PARQUET_ROWS,
    SUFFIXES,
    count_csv_records,
    csv_columns,
    csv_records,
    json_lines,
    open_csv,
    parquet_rows,
)
from .._inputs import pyarrow as _pyarrow
from .._jsonpath import JsonProblem, canonical_json
from ..errors import InvalidInputError, MissingAssetError

__all__ = ["ROW_FORMATS", "Row", "RowWriter", "answer_type", "count_rows", "file_format", "input_columns", "read_rows"]

#: The formats a batch reads and writes: each row is an object, and rows stream.
ROW_FORMATS = ("jsonl", "csv", "parquet")


@dataclass(frozen=True)
class Row:
    index: int
    #: The row as a mapping of column to value; None when the row could not be read.
    value: dict[str, Any] | None
    #: Why the row could not be read, else None.
    problem: str | None = None
    #: The line as it was, for a row that could not be read (JSON Lines).
    raw: str | None = None


def file_format(path: str | os.PathLike[str], field: str) -> str:
    suffix = Path(path).suffix.lower()
    fmt = SUFFIXES.get(suffix)
    if fmt not in ROW_FORMATS:
        raise InvalidInputError(
            field,
            "a .jsonl, .csv or .parquet file",
            detail=f"{os.fspath(path)!r}: cannot tell its format from {suffix or 'no extension'!r}",
        )
    return fmt


# -- reading ---------------------------------------------------------------------------------


def _jsonl_rows(path: Path) -> Iterator[Row]:
    with open(path, "rb") as file:
        for index, (number, text, value) in enumerate(json_lines(file)):
            if isinstance(value, UnicodeDecodeError):
                yield Row(index, None, f"line {number}: byte {value.start} is not UTF-8", text)
            elif isinstance(value, JsonProblem):
                yield Row(index, None, f"line {number}: not JSON: {value.where()}{value.problem}", text)
            elif isinstance(value, dict):
                yield Row(index, value)
            else:
                yield Row(index, None, f"line {number}: expected a JSON object, got {type(value).__name__}", text)


def _csv_rows(path: Path) -> Iterator[Row]:
    # Bytes that are not UTF-8 become lone surrogates: such a row fails alone, and is written back as it came.
    with open_csv(path) as file:
        for index, (record, extra) in enumerate(csv_records(file)):
            if extra:
                yield Row(index, record, f"record {index + 1} has {extra} more field(s) than the header")
            else:
                yield Row(index, record)


def _parquet_rows(path: Path) -> Iterator[Row]:
    for index, value in enumerate(parquet_rows(path)):
        yield Row(index, value)


def read_rows(path: Path, fmt: str) -> Iterator[Row]:
    """Every data row of the file, in order."""
    return {"jsonl": _jsonl_rows, "csv": _csv_rows, "parquet": _parquet_rows}[fmt](path)


def count_rows(path: Path, fmt: str) -> int:
    if fmt == "parquet":
        return _pyarrow().parquet.ParquetFile(path).metadata.num_rows
    if fmt == "jsonl":
        with open(path, "rb") as file:
            return sum(1 for line in file if line.strip())
    with open_csv(path) as file:
        return count_csv_records(file)


def input_columns(path: Path, fmt: str) -> list[str] | None:
    """The columns every row has, where the file says (a CSV header, a Parquet schema); None for JSON Lines."""
    if fmt == "parquet":
        return list(_pyarrow().parquet.ParquetFile(path).schema_arrow.names)
    if fmt == "csv":
        with open_csv(path) as file:
            return csv_columns(file)
    return None


def check_readable(path: Path, fmt: str, field: str) -> None:
    """The file opens as its format (a Parquet footer, a CSV header), else bad input naming ``field``."""
    try:
        if fmt == "parquet":
            _pyarrow().parquet.ParquetFile(path)
        elif fmt == "csv" and not input_columns(path, fmt):
            raise InvalidInputError(field, "a CSV file with a header row", detail=f"{os.fspath(path)!r} has none")
    except (InvalidInputError, MissingAssetError):
        raise
    except Exception as error:  # pyarrow's errors are its own
        raise InvalidInputError(field, f"a {fmt} file", detail=f"{os.fspath(path)!r}: {error}") from None


# -- writing ---------------------------------------------------------------------------------


def answer_type(column: str):
    pa = _pyarrow()
    return {"kept": pa.bool_(), "choice": pa.string(), "rank": pa.int64()}.get(column, pa.float64())


def _json_line(value: dict[str, Any]) -> bytes:
    text = json.dumps(value, ensure_ascii=False, default=str)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate (a CSV cell that was not UTF-8): escaped, so the line stays UTF-8
        return json.dumps(value, ensure_ascii=True, default=str).encode("ascii") + b"\n"


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return canonical_json(value)


class RowWriter:
    """Writes rows with their answers to ``path`` in ``fmt``; ``columns`` are the input's, for CSV and Parquet."""

    def __init__(self, path: Path, fmt: str, *, answer_columns: Sequence[str], columns: list[str], schema: Any = None):
        self.path = path
        self.fmt = fmt
        self.answer_columns = list(answer_columns)
        self.columns = columns
        self._file: BinaryIO | Any = None
        self._pending: list[dict[str, Any]] = []
        if fmt == "jsonl":
            self._file = open(path, "wb")
        elif fmt == "csv":
            self._file = open(path, "w", encoding="utf-8", errors="surrogateescape", newline="")
            self._csv = csv.writer(self._file)
            self._csv.writerow(columns + self.answer_columns)
        else:
            pa = _pyarrow()
            fields = list(schema) if schema is not None else []
            for column in self.answer_columns:
                fields.append(pa.field(column, answer_type(column)))
            self._schema = pa.schema(fields)
            self._file = pa.parquet.ParquetWriter(path, self._schema)

    def write(self, row: dict[str, Any], answers: dict[str, Any] | None) -> None:
        merged = dict(row)
        for column in self.answer_columns:
            merged[column] = None if answers is None else answers.get(column)
        if self.fmt == "jsonl":
            self._file.write(_json_line(merged))
        elif self.fmt == "csv":
            try:
                self._csv.writerow([_csv_value(merged.get(column)) for column in self.columns + self.answer_columns])
            except UnicodeEncodeError:  # a lone surrogate from JSON text: written escaped rather than lost
                self._csv.writerow(
                    [
                        _csv_value(merged.get(column)).encode("utf-8", "backslashreplace").decode("utf-8")
                        for column in self.columns + self.answer_columns
                    ]
                )
        else:
            self._pending.append(merged)
            if len(self._pending) >= PARQUET_ROWS:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            pa = _pyarrow()
            self._file.write_table(pa.Table.from_pylist(self._pending, schema=self._schema))
            self._pending = []

    def close(self) -> None:
        if self.fmt == "parquet":
            self._flush()
        self._file.close()


def output_layout(path: Path, fmt: str, rows: Iterator[Row], out_fmt: str) -> tuple[list[str], Any]:
    """The columns (CSV) and schema (Parquet) an output needs: the input's, else gathered from every row."""
    if out_fmt == "jsonl":
        return [], None
    if out_fmt == "csv":
        if fmt == "csv":
            return input_columns(path, fmt) or [], None
        seen: dict[str, None] = {}
        for row in rows:
            if row.value is not None:
                seen.update(dict.fromkeys(row.value))
        return list(seen), None
    pa = _pyarrow()
    if fmt == "parquet":
        schema = pa.parquet.ParquetFile(path).schema_arrow
        return list(schema.names), schema
    if fmt == "csv":
        names = input_columns(path, fmt) or []
        return names, pa.schema([pa.field(name, pa.string()) for name in names])
    schemas, block = [], []
    for row in rows:
        if row.value is not None:
            block.append(row.value)
        if len(block) >= PARQUET_ROWS:
            schemas.append(pa.Table.from_pylist(block).schema)
            block = []
    if block or not schemas:
        schemas.append(pa.Table.from_pylist(block).schema)
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    return list(schema.names), schema
