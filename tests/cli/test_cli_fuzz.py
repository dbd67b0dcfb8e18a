"""500 generated command lines, hostile values in every option: each ends in an exit status, never a traceback.

They run in this process (typer's CliRunner captures the streams) through
:func:`decirank.cli.main`, the console script's entry point, so an exception
that escapes it is exactly what a user would see as a traceback. Servers are
not started: ``serve`` and ``mcp`` stop where they would begin to listen, once
their arguments have been checked.
"""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from decirank import calibrate
from decirank.cli import main
from tests.calibration_rows import pet_rows

CASES = 500
SEED = 19

# Values that have broken a command line before, or could: huge and odd numbers, blank and
# undecodable text, deep JSON, URLs and hosts that parse but cannot work.
HOSTILE = [
    "",
    " ",
    "0",
    "-1",
    "1e999",
    "nan",
    "inf",
    "-inf",
    "999999999999999999999999999999",
    "-999999999999999999999999999999",
    "0x10",
    "1.5",
    "abc",
    "\udc80",
    "é" * 3,
    "x" * 5000,
    "[" * 3000 + "]" * 3000,
    json.dumps([[["deep"]]]),
    '{"a": NaN}',
    '{"q": "fleas"}',
    "[1, 2",
    "http://127.0.0.1:99999",
    "http://[::1",
    "https://",
    "ftp://x",
    "not a host",
    "256.1.1.1",
    "-",
    "/nonexistent/file.json",
    "exec:true",
    "validate:json",
    "score:",
    "lexical",
    "nope:model",
    "r/a",
]

# Each command with the options it takes and a few plausible first arguments.
COMMANDS: dict[tuple[str, ...], tuple[list[str], list[str]]] = {
    ("rank",): (["-i", "-s", "-d", "--none", "-k", "-m", "--base-url", "--timeout"], ["ITEMS", "-"]),
    ("rerank",): (["-q", "-k", "--min-relevance", "--per-call", "-m", "--base-url", "--timeout"], ["ITEMS", "-"]),
    ("filter",): (
        [
            "-q",
            "-s",
            "--min-confidence",
            "-d",
            "-m",
            "--base-url",
            "--timeout",
            "--examples",
            "--calibration",
            "--target-recall",
            "--target-precision",
            "--confidence",
        ],
        ["ITEMS"],
    ),
    ("batch", "filter"): (
        [
            "-o",
            "-q",
            "-s",
            "--examples",
            "--min-confidence",
            "-m",
            "--base-url",
            "--timeout",
            "-w",
            "--batch-size",
            "--engine",
            "--errors",
            "--address",
        ],
        ["ITEMS"],
    ),
    ("batch", "rerank"): (["-o", "--query", "--query-field", "--text", "-w", "--batch-size", "-m"], ["ITEMS"]),
    ("score-list",): (
        ["--refs", "-e", "-k", "--max-concurrency", "-m", "--exec-timeout", "--timeout", "--base-url"],
        [],
    ),
    ("runs", "list"): (["--limit", "--tool", "--status"], []),
    ("runs", "show"): ([], ["abc", ""]),
    ("runs", "stats"): ([], []),
    ("artifacts", "get"): ([], ["r/a", "bad ref", ""]),
    ("artifacts", "ls"): ([], []),
    ("examples", "show"): ([], ["name", ""]),
    ("calibrations", "show"): (["--json"], ["name", ""]),
    ("plan", "run"): (["--input"], ["PLAN", "-"]),
    ("serve",): (["--host", "-p", "-m", "--max-body-bytes", "--timeout", "--log-level"], []),
    ("mcp",): (["-t", "--host", "-p"], []),
    ("models",): ([], []),
}
FLAGS = ["--json", "--help", "--overwrite", "--fail-fast", "--allow-exec", "--bogus"]
# Values each option takes when it is right, so that a line gets past its first check and one
# hostile value meets the code behind it.
PLAUSIBLE = {
    "-i": "Which one?", "-q": "Is it about fleas?", "--query": "fleas", "-s": '{"q": "fleas"}', "-d": "title",
    "--none": "none", "-k": "2", "-m": "lexical", "--base-url": "http://127.0.0.1:9", "--timeout": "5",
    "--min-relevance": "0.1", "--per-call": "10", "--min-confidence": "0.5", "--examples": "-", "-o": "out.jsonl",
    "-w": "0", "--batch-size": "2", "--engine": "local", "--errors": "errors.jsonl", "--query-field": "q",
    "--text": "title", "--refs": '["r/a"]', "-e": "validate:json", "--max-concurrency": "2",
    "--exec-timeout": "5", "--limit": "5", "--tool": "rank", "--status": "success", "--input": '{"items": ["a"]}',
    "--host": "127.0.0.1", "-p": "8000", "--max-body-bytes": "1000", "--log-level": "info", "-t": "http",
    "--address": "auto", "--calibration": "pets", "--target-recall": "0.9", "--target-precision": "0.9",
    "--confidence": "0.9",
}  # fmt: skip


def command_lines(items: str, rows: str, plan: str) -> list[tuple[list[str], str]]:
    """``CASES`` argument vectors and standard inputs, the same on every run."""
    chooser = random.Random(SEED)
    # First the lines that once ended in a traceback or uvicorn's multi-line error.
    cases = [
        (["batch", "filter", rows, "-o", "out.jsonl", "-q", "Is it?", "-w", "999999999999999999999999999999"], ""),
        (["rank", items, "-i", "Which?", "-m", "systemone:x", "--base-url", "http://127.0.0.1:99999"], ""),
        (["serve", "--host", "not a host"], ""),
        (["serve", "--host", "256.1.1.1"], ""),
        (["mcp", "-t", "http", "--host", "256.1.1.1"], ""),
        (["plan", "run", plan, "--input", '{"items": %s}' % ("[" * 3000 + "]" * 3000)], ""),
    ]
    while len(cases) < CASES:
        command, (options, firsts) = chooser.choice(list(COMMANDS.items()))
        argv = list(command)
        if firsts:
            first = chooser.choice([*firsts, *HOSTILE])
            argv.append(first.replace("ITEMS", rows if command[0] == "batch" else items).replace("PLAN", plan))
        for option in chooser.sample(options, k=chooser.randint(0, len(options))):
            plausible = PLAUSIBLE.get(option)
            argv += [option, plausible if plausible and chooser.random() < 0.7 else chooser.choice(HOSTILE)]
        if chooser.random() < 0.2:
            argv.append(chooser.choice(FLAGS))
        stdin = chooser.choice(["", '["a", "b"]', "[" * 3000, '{"x": NaN}', "\udc80"])
        cases.append((argv, stdin))
    return cases


@pytest.fixture
def no_listening(monkeypatch):
    """``serve`` and ``mcp`` return where they would listen: their arguments are what is under test."""

    def bound_and_returned(options, sock=None):
        if sock is not None:  # the port serve bound before its banner, closed at once
            sock.close()

    monkeypatch.setattr("decirank.server.workers.serve", bound_and_returned)
    # serve and mcp make their process the reaper of what exec commands leave; in-process here, that would make
    # the test process end the children of every later test
    monkeypatch.setattr("decirank.tools._evaluators.exec.adopt_orphans", lambda: None)
    monkeypatch.setattr("decirank.server.workers.adopt_orphans", lambda: None)
    monkeypatch.setattr("decirank.cli.mcp.serve", lambda *args, **kwargs: None)


def test_500_generated_command_lines_never_show_a_traceback(tmp_path, monkeypatch, no_listening):
    """Every generated command line ends with an exit status (0, 1, 2 or 130) and nothing escapes as an exception."""
    monkeypatch.setenv("DECIRANK_ROLE_DECIDER", "lexical")  # the default role, without loading the local model
    monkeypatch.chdir(tmp_path)
    items = tmp_path / "items.json"
    items.write_text(json.dumps(["fleas on dogs", {"title": "bread"}, "cars"]))
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"title": "fleas on dogs", "q": "fleas"}\n{"title": "bread", "q": "fleas"}\n')
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "- id: E1\n  tool_name: builtin__rank\n  input:\n    items: '{{input.items}}'\n"
        "    instructions: Which?\n    state: x\n"
    )
    # A calibration for filter's plausible question, so that the targets meet the code that reads it.
    calibrate(
        pet_rows(), PLAUSIBLE["-q"], name=PLAUSIBLE["--calibration"], state=json.loads(PLAUSIBLE["-s"]), model="lexical"
    )
    runner = CliRunner()
    tracebacks, statuses = [], {}
    for argv, stdin in command_lines(str(items), str(rows), str(plan)):
        if argv[0] == "batch" and "-w" not in argv:
            argv += ["-w", "0"]  # in this process: worker processes would only make the test slow
        with runner.isolation(input=stdin.encode("utf-8", "surrogateescape")) as (_, err, *_):
            try:
                status = main(argv)
            except SystemExit as exit:  # a command that exits by itself, as --help may
                status = exit.code if isinstance(exit.code, int) else 1
            except BaseException as error:  # noqa: BLE001 - any escape is what the test counts
                tracebacks.append((argv, f"{type(error).__name__}: {error}"[:300]))
                continue
            stderr = err.getvalue().decode("utf-8", "replace") if err is not None else ""
        if "Traceback" in stderr:
            tracebacks.append((argv, stderr[-300:]))
        statuses[status] = statuses.get(status, 0) + 1
    assert tracebacks == [], f"{len(tracebacks)} of {CASES}: {tracebacks[:5]}"
    assert set(statuses) <= {0, 1, 2, 130}, statuses
