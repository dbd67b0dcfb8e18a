"""Every command's list input: JSON, JSON Lines, CSV, Parquet and text, from a file or standard input.

The reader itself (``read_items``) is run on real files and on real bytes on standard input;
the commands are run as real subprocesses, as a user runs them.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from decirank._inputs import FORMATS, read_items, sniff_format
from decirank.cli._output import FormatOption, read_json_list
from decirank.errors import InvalidInputError
from tests.cli._run import decirank

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TICKETS = [
    {"id": 0, "body": "I was charged twice"},
    {"id": 1, "body": "The app crashes at login"},
    {"id": 2, "body": "Where is my refund?"},
    {"id": 3, "body": "My dog ate the card"},
]
BODIES = [ticket["body"] for ticket in TICKETS]
#: CSV has no types: its cells come back as the text they are.
CSV_ROWS = [{"id": str(ticket["id"]), "body": ticket["body"]} for ticket in TICKETS]


def _csv_bytes(rows: list[dict]) -> bytes:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")


def _parquet_bytes(rows: list[dict]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


#: Each format: a file name whose extension says it, its bytes, and the list they hold.
SAMPLES = {
    "json": ("tickets.json", json.dumps(TICKETS).encode(), TICKETS),
    "jsonl": ("tickets.jsonl", "".join(json.dumps(t) + "\n" for t in TICKETS).encode(), TICKETS),
    "csv": ("tickets.csv", _csv_bytes(TICKETS), CSV_ROWS),
    "parquet": ("tickets.parquet", _parquet_bytes(TICKETS), TICKETS),
    "text": ("tickets.txt", "".join(body + "\n" for body in BODIES).encode(), BODIES),
}


def _stdin(monkeypatch, data: bytes) -> None:
    """Standard input holding ``data``, as a pipe gives it to the reader."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def _refused(source: str, format: str | None = None) -> str:
    with pytest.raises(InvalidInputError) as raised:
        read_items(source, "items", format)
    return str(raised.value)


# -- the reader -----------------------------------------------------------------------------------


def test_every_format_has_a_sample():
    # The --format choices and the samples below cover each other: a new format gets tests.
    assert set(SAMPLES) == set(FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_is_read_by_its_extension(tmp_path, fmt):
    name, data, expected = SAMPLES[fmt]
    path = tmp_path / name
    path.write_bytes(data)
    assert read_items(str(path), "items") == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_standard_input_is_read_in_the_format_given(monkeypatch, fmt):
    _name, data, expected = SAMPLES[fmt]
    _stdin(monkeypatch, data)
    assert read_items("-", "items", fmt) == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_format_given_wins_over_the_extension(tmp_path, fmt):
    # A file named for no format, or the wrong one, reads as --format says.
    _name, data, expected = SAMPLES[fmt]
    path = tmp_path / "tickets.dat"
    path.write_bytes(data)
    assert read_items(str(path), "items", fmt) == expected


@pytest.mark.parametrize(
    ("data", "fmt", "expected"),
    [
        (SAMPLES["json"][1], "json", TICKETS),
        (b"  \n[1, 2]", "json", [1, 2]),
        (SAMPLES["jsonl"][1], "jsonl", TICKETS),
        (b'"a cat"\n"a car"\n', "jsonl", ["a cat", "a car"]),  # lines of JSON strings are still JSON Lines
        (SAMPLES["parquet"][1], "parquet", TICKETS),
        (SAMPLES["text"][1], "text", BODIES),
        (b"a cat\n\n  \na car\r\n", "text", ["a cat", "a car"]),  # blank lines are no items; CRLF ends a line
        (b'"quoted" and then not\n', "text", ['"quoted" and then not']),
        # CSV has nothing to tell it from text by: without --format its lines are items, header and all
        (SAMPLES["csv"][1], "text", ["id,body"] + [f"{t['id']},{t['body']}" for t in TICKETS]),
        (b"", "jsonl", []),
    ],
)
def test_standard_input_is_sniffed_by_content(monkeypatch, data, fmt, expected):
    assert sniff_format(data) == fmt
    _stdin(monkeypatch, data)
    assert read_items("-", "items") == expected


def test_an_unknown_extension_is_sniffed_by_content(tmp_path):
    for name, data, expected in [
        ("a.data", b"[1, 2]", [1, 2]),
        ("b", b"one\ntwo\n", ["one", "two"]),
        ("c.yaml", b'{"a": 1}\n{"a": 2}\n', [{"a": 1}, {"a": 2}]),
        ("d.bin", SAMPLES["parquet"][1], TICKETS),
    ]:
        (tmp_path / name).write_bytes(data)
        assert read_items(str(tmp_path / name), "items") == expected, name


def test_a_json_file_of_json_lines_is_json_lines(tmp_path):
    # Before more formats were read, every file that was not an array was JSON Lines: .json files too.
    path = tmp_path / "rows.json"
    path.write_bytes(SAMPLES["jsonl"][1])
    assert read_items(str(path), "items") == TICKETS


def test_text_is_kept_as_text(tmp_path):
    # --format text: a line that happens to be JSON is still the line, not the value.
    path = tmp_path / "lines.dat"
    path.write_text('42\n"quoted"\n{"a": 1}\n', encoding="utf-8")
    assert read_items(str(path), "items", "text") == ["42", '"quoted"', '{"a": 1}']


def test_a_line_separator_inside_json_lines_is_not_a_new_line(tmp_path):
    # U+2028 may stand raw in a JSON string; only "\n" ends a JSON Lines line.
    path = tmp_path / "odd.jsonl"
    path.write_text('"a\u2028b"\n"c"\n', encoding="utf-8")
    assert read_items(str(path), "items") == ["a\u2028b", "c"]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "text"])
def test_a_byte_order_mark_is_no_part_of_the_first_item(tmp_path, fmt):
    name, data, expected = SAMPLES[fmt]
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + data)
    assert read_items(str(path), "items") == expected


def test_csv_keeps_quoted_fields_whole(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('id,body\n7,"one, two\nthree"\n8,\n', encoding="utf-8")
    assert read_items(str(path), "items") == [{"id": "7", "body": "one, two\nthree"}, {"id": "8", "body": ""}]


def test_parquet_values_come_back_as_json_can_carry_them(tmp_path):
    # A timestamp or a NaN in an item would break --json's output: they are text and null.
    path = tmp_path / "odd.parquet"
    when = datetime.datetime(2024, 5, 1, 12, 30)
    pq.write_table(pa.Table.from_pylist([{"text": "late", "at": when, "score": float("nan")}]), path)
    items = read_items(str(path), "items")
    assert items == [{"text": "late", "at": "2024-05-01T12:30:00", "score": None}]
    json.dumps(items, allow_nan=False)


def test_read_json_list_is_the_same_reader(tmp_path):
    # The commands that call the old name read every format too.
    path = tmp_path / "t.csv"
    path.write_bytes(SAMPLES["csv"][1])
    assert read_json_list(str(path), "items") == CSV_ROWS


def test_the_example_files_read():
    assert read_items(str(EXAMPLES / "tickets.jsonl"), "items") == TICKETS
    assert read_items(str(EXAMPLES / "tickets.csv"), "items") == CSV_ROWS
    assert read_items(str(EXAMPLES / "tickets.txt"), "items") == BODIES
    reviews = read_items(str(EXAMPLES / "reviews.parquet"), "items")
    assert reviews and all(isinstance(row["review"], str) for row in reviews)


# -- errors: one line naming the input and what was expected --------------------------------------


def test_a_missing_file_names_the_formats_read(tmp_path):
    message = _refused(str(tmp_path / "nope.csv"))
    assert message.startswith("items: expected a JSON or JSON Lines file, a CSV, Parquet or text file")
    assert "no file" in message


def test_a_missing_file_with_a_format_names_that_format(tmp_path):
    message = _refused(str(tmp_path / "nope"), "parquet")
    assert message.startswith("items: expected a Parquet file")


@pytest.mark.parametrize(
    ("name", "data", "fmt", "words"),
    [
        ("bad.jsonl", b'{"a": 1}\n{"a": \n', None, ["JSON Lines", "line 2"]),
        ("bad.json", b"[1, 2", None, ["a JSON array", "bad.json"]),
        ("obj.dat", b'{"a": 1}', "json", ["a JSON array", "holds a JSON object"]),
        # a bad line among JSON objects is a mistake, not a line of text
        ("bad.dat", b'{"a": 1}\nnot json\n', None, ["JSON Lines", "line 2"]),
        ("huge.jsonl", b"1" * 5000 + b"\n", None, ["digits"]),
        ("extra.csv", b"id,body\n1,a,b\n", None, ["CSV", "record 1 has 1 more field(s)"]),
        ("broken.parquet", b"PAR1 not really", None, ["a Parquet file", "broken.parquet"]),
        ("latin.txt", b"caf\xe9\n", None, ["UTF-8", "byte 3"]),
        ("latin.csv", b"a\ncaf\xe9\n", None, ["UTF-8", "byte 5"]),
        ("latin.jsonl", b'"a"\n"caf\xe9"\n', None, ["UTF-8", "byte 8"]),
    ],
)
def test_bad_content_is_one_clear_error(tmp_path, name, data, fmt, words):
    path = tmp_path / name
    path.write_bytes(data)
    message = _refused(str(path), fmt)
    assert message.startswith("items: expected")
    assert all(word in message for word in words), message
    assert "\n" not in message


def test_an_unknown_format_names_the_option():
    message = _refused("-", "xml")
    assert message.startswith("--format: expected one of json, jsonl, csv, parquet, text")


def test_bad_json_on_standard_input_names_standard_input(monkeypatch):
    _stdin(monkeypatch, b"[1, 2")
    assert "standard input" in _refused("-")


# -- the commands --------------------------------------------------------------------------------


def _json_out(done) -> dict:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_score_reads_a_csv_file():
    # The issue's own failing command: CSV rows are the texts, each an object keyed by the header.
    data = _json_out(decirank("score", str(EXAMPLES / "tickets.csv"), "-q", "Is this about billing?",
                              "-m", "lexical", "--json"))
    assert len(data["probabilities"]) == len(CSV_ROWS)


def test_score_reads_text_lines_on_standard_input():
    done = decirank("score", "-", "-q", "Is this about billing?", "-m", "lexical", "--json",
                    input="I was charged twice\nThe app crashes at login\n")
    assert len(_json_out(done)["probabilities"]) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_filter_reads_every_format_from_a_file(tmp_path, fmt):
    name, data, expected = SAMPLES[fmt]
    path = tmp_path / name
    path.write_bytes(data)
    done = decirank("filter", str(path), "-q", "Is this about billing?", "-m", "lexical", "--json")
    decisions = _json_out(done)["decisions"]
    assert [decision["item"] for decision in decisions] == expected


@pytest.mark.parametrize("fmt", ["json", "jsonl", "text"])
def test_filter_reads_the_text_formats_from_standard_input(fmt):
    # Told by content: nothing names the input. (Parquet's bytes: the next test.)
    _name, data, expected = SAMPLES[fmt]
    done = decirank("filter", "-", "-q", "Is this about billing?", "-m", "lexical", "--json", input=data.decode())
    assert [decision["item"] for decision in _json_out(done)["decisions"]] == expected


def test_parquet_on_standard_input():
    done = subprocess.run(
        [sys.executable, "-m", "decirank", "filter", "-", "-q", "Is this about billing?", "-m", "lexical", "--json"],
        input=SAMPLES["parquet"][1],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [decision["item"] for decision in json.loads(done.stdout)["decisions"]] == TICKETS


def test_describe_picks_a_csv_column():
    # CSV rows are objects, so --describe's dot path shows the body column in the table.
    done = decirank("filter", str(EXAMPLES / "tickets.csv"), "-q", "Is this about billing?", "--describe", "body",
                    "-m", "lexical", "--min-confidence", "0")
    assert done.returncode == 0, done.stderr
    for body in BODIES:
        assert body in done.stdout
    assert '"body"' not in done.stdout  # the column's text, not the row as JSON


def test_describe_picks_a_parquet_column():
    done = decirank("rank", str(EXAMPLES / "reviews.parquet"), "-i", "Which review is positive?",
                    "--describe", "review", "-m", "lexical")
    assert done.returncode == 0, done.stderr
    assert "a moving film" in done.stdout and '"review"' not in done.stdout


def test_bad_input_on_the_command_line_is_one_line_naming_the_argument(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"body": "ok"}\n{"body": \n', encoding="utf-8")
    done = decirank("score", str(path), "-q", "Billing?", "-m", "lexical")
    assert done.returncode == 2
    assert done.stderr.startswith("error: TEXTS: expected a JSON array or JSON Lines")
    assert "line 2" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_parquet_without_pyarrow_names_the_extra_to_install():
    # pyarrow comes with the batch extra; without it, reading Parquet says what to install.
    # sys.modules[...] = None makes "import pyarrow" fail as it does where pyarrow is not installed.
    program = (
        "import sys; sys.modules['pyarrow'] = None; from decirank.cli import main; "
        f"sys.exit(main(['score', {str(EXAMPLES / 'reviews.parquet')!r}, '-q', 'Good?', '-m', 'lexical']))"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "decirank[batch]" in done.stderr and "Traceback" not in done.stderr


# -- the --format option, as a command defines it --------------------------------------------------


def _command() -> typer.Typer:
    """A command that reads its items as the tool commands do, with the shared --format option."""
    app = typer.Typer()

    @app.command()
    def count(items: Annotated[str, typer.Argument()], input_format: FormatOption = None) -> None:
        print(json.dumps(read_items(items, "items", input_format)))

    return app


def test_format_option_reads_standard_input_in_that_format():
    done = CliRunner().invoke(_command(), ["-", "--format", "CSV"], input=SAMPLES["csv"][1])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == CSV_ROWS


def test_format_option_refuses_an_unknown_format():
    # Run as decirank's main runs a command, so the message is the one line it prints (no boxed help).
    command = typer.main.get_command(_command())
    with pytest.raises(typer.BadParameter) as raised:
        command.main(["-", "--format", "xml"], standalone_mode=False)
    assert "expected one of json, jsonl, csv, parquet, text, not 'xml'" in raised.value.format_message()
    assert "--format" in raised.value.format_message()
