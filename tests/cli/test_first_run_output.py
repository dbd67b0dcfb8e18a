"""What a newcomer sees on a first run: whole lines when piped, -h, each batch tool's own help, honest summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.batch.conftest import ticket_rows, write_rows

QUESTION = ("--question", "Is this about a payment?", "--model", "lexical")


def piped(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    """``decirank *args`` with its output piped and no COLUMNS set, as in a log or a grep."""
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "decirank", *args], capture_output=True, text=True, env=env, timeout=120, cwd=cwd
    )


def test_piped_lines_are_never_wrapped(tmp_path):
    """A summary line longer than 80 columns goes out whole when piped (rich would wrap it at 80)."""
    source = write_rows(tmp_path / "in.jsonl", ticket_rows(30))
    done = piped("batch", "filter", str(source), "--out", str(tmp_path / "out.jsonl"), *QUESTION, "--text", "text",
                 "--workers", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, lines
    assert len(lines[1]) > 80 and "rows/s" in lines[1] and lines[1].rstrip().split(" · ")[-1].startswith("run ")


@pytest.mark.parametrize("words", [("-h",), ("rank", "-h"), ("batch", "-h"), ("runs", "list", "-h")])
def test_minus_h_is_help(words):
    """-h is --help, on the app and on every command."""
    done = piped(*words)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: decirank")


def test_batch_tool_help_lists_that_tools_options():
    """decirank batch filter --help lists filter's options and the shared ones, not the other tools'."""
    # Help is wrapped to the terminal's width, so phrases are looked for with the line breaks taken out.
    shown = {tool: " ".join(piped("batch", tool, "--help").stdout.split()) for tool in ("filter", "score", "rerank")}
    assert all("Run " in text and "decirank batch --help lists every tool's" in text for text in shown.values())
    assert "--min-confidence" in shown["filter"] and "--kept-only" in shown["filter"] and "--out" in shown["filter"]
    assert "--query-field" not in shown["filter"] and "--true" not in shown["filter"]
    assert "--true" in shown["score"] and "--kept-only" not in shown["score"]
    assert "--query-field" in shown["rerank"] and "--question" not in shown["rerank"]
    every = piped("batch", "--help").stdout
    assert all(flag in every for flag in ("--min-confidence", "--true", "--query-field", "--options"))


def test_the_batch_summary_counts_the_rows_it_wrote(tmp_path):
    """With --kept-only the summary says how many rows were written of how many read, and --json has both."""
    source = write_rows(tmp_path / "in.jsonl", ticket_rows(30))
    dogs = ("--question", "Is this about a dog?", "--state", "dog", "--text", "text", "--model", "lexical")
    out = tmp_path / "kept.jsonl"
    done = piped("batch", "filter", str(source), "--out", str(out), *dogs, "--workers", "0", "--kept-only", "--json")
    summary = json.loads(done.stdout)
    written = len(out.read_text(encoding="utf-8").splitlines())
    assert summary["rows"] == 30 and summary["written"] == written < 30
    again = piped("batch", "filter", str(source), "--out", str(tmp_path / "k2.jsonl"), *dogs, "--workers", "0",
                  "--kept-only")  # fmt: skip
    first = again.stdout.splitlines()[0]
    assert first.startswith(f"filter: {written} rows written to ") and "of 30 read" in first


def test_an_empty_list_costs_nothing(tmp_path):
    """An empty list asks no model: its cost is nothing, never "unknown", and a local model says it is free."""
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    done = piped("filter", str(empty), *QUESTION)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].endswith("0 call(s) · 0 input tokens · free (local model)")
    header = tmp_path / "empty.csv"
    header.write_text("id,text\n", encoding="utf-8")
    batch = piped("batch", "filter", str(header), "--out", str(tmp_path / "o.jsonl"), *QUESTION, "--text", "text")
    assert batch.returncode == 0, batch.stderr
    assert "cost $0.000000" in batch.stdout and "unknown" not in batch.stdout


def test_a_batch_answered_here_says_it_is_free(tmp_path):
    """A batch whose every model runs in this process prints "free (local model)", as the tool commands do."""
    rows = tmp_path / "rows.csv"
    rows.write_text("id,text\n1,I paid twice\n2,Nice weather\n", encoding="utf-8")
    batch = piped("batch", "filter", str(rows), "--out", str(tmp_path / "o.jsonl"), *QUESTION, "--text", "text")
    assert batch.returncode == 0, batch.stderr
    assert "cost free (local model)" in batch.stdout


def test_csv_to_parquet_says_its_columns_are_text(tmp_path):
    """A CSV's values are text; written to Parquet, the summary says its columns are strings there."""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    source = write_rows(tmp_path / "in.csv", ticket_rows(6))
    out = tmp_path / "out.parquet"
    done = piped("batch", "filter", str(source), "--out", str(out), *QUESTION, "--text", "text", "--workers", "0")
    assert done.returncode == 0, done.stderr
    assert "note: a CSV's values are text, so its columns are strings in the Parquet output" in done.stdout
    assert str(pq.read_schema(out).field("id").type) == "string"
    jsonl = piped("batch", "filter", str(write_rows(tmp_path / "in.jsonl", ticket_rows(6))), "--out",
                  str(tmp_path / "o2.parquet"), *QUESTION, "--text", "text", "--workers", "0")  # fmt: skip
    assert "note:" not in jsonl.stdout
