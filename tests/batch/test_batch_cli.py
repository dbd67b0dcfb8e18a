"""``decirank batch`` as a user runs it: a real subprocess, killed with SIGKILL and run again, and bad options.

Bad options all run at once, in parallel, from one module fixture; each
parametrised test then checks its own case: one line on stderr naming the
option, exit 2, never a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import decirank
from tests.cli._run import decirank as run_cli
from tests.loopback import HeldAnswers, Reply, ScriptedServer
from tests.processes import is_running

from .conftest import read_output, ticket_rows, write_rows

FILTER = ("--question", "Is this about a payment?", "--text", "text", "--model", "lexical")


def test_batch_writes_the_output_and_says_what_it_did(tmp_path):
    source = write_rows(tmp_path / "in.csv", ticket_rows(50))
    done = run_cli(
        "batch",
        "classify",
        str(source),
        "--out",
        str(tmp_path / "out.jsonl"),
        "--question",
        "Which queue?",
        "--options",
        "billing,pets,tech",
        "--text",
        "text",
        "--model",
        "lexical",
        "--workers",
        "0",
    )
    assert done.returncode == 0, done.stderr
    assert "classify: 50 rows written to" in done.stdout and "50 answered" in done.stdout
    assert {row["choice"] for row in read_output(tmp_path / "out.jsonl")} <= {"billing", "pets", "tech"}
    as_json = run_cli(
        "batch", "filter", str(source), "--out", str(tmp_path / "out.parquet"), *FILTER, "--json", "--workers", "1"
    )
    summary = json.loads(as_json.stdout)
    assert (summary["rows"], summary["answered"], summary["engine"], summary["workers"]) == (50, 50, "local", 1)
    assert summary["run_id"] and summary["models"] == {"lexical:bm25": summary["usage"]}


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_batch_killed_with_sigkill_resumes_to_the_bytes_of_an_uninterrupted_one(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", ticket_rows(3000))
    out = tmp_path / "out.jsonl"
    command = [
        sys.executable,
        "-m",
        "decirank",
        "batch",
        "filter",
        str(source),
        "--out",
        str(out),
        *FILTER,
        "--workers",
        "2",
        "--batch-size",
        "3",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    journal = tmp_path / "out.jsonl.progress" / "done.jsonl"
    deadline = time.monotonic() + 120
    while not (journal.exists() and journal.read_bytes().count(b"\n") >= 30):
        assert process.poll() is None, process.communicate()[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    workers = _children(process.pid)
    process.send_signal(signal.SIGKILL)  # the driver alone, mid-way; its workers must notice and go
    process.communicate()
    assert process.returncode == -signal.SIGKILL and not out.exists()
    done_before = journal.read_bytes().count(b"\n")
    assert 30 <= done_before < 1000
    gone_by = time.monotonic() + 10
    while any(is_running(pid) for pid in workers):
        assert time.monotonic() < gone_by, "a worker outlived its killed driver"
        time.sleep(0.1)

    again = run_cli(
        "batch", "filter", str(source), "--out", str(out), *FILTER, "--workers", "2", "--batch-size", "3", "--json"
    )
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["resumed"] >= 3 * done_before - 3 and summary["answered"] == 3000
    whole = decirank.batch(
        "filter",
        source,
        tmp_path / "whole.jsonl",
        question=FILTER[1],
        text="text",
        model="lexical",
        workers=0,
        batch_size=3,
    )
    assert out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()

    # One run for the whole batch, killed and resumed: it ends as a success, its chunks its children.
    runs = json.loads(run_cli("runs", "list", "--tool", "batch", "--json", "--limit", "10").stdout)
    batches = [run for run in runs if run["id"] != whole.run_id]
    assert [run["status"] for run in batches] == ["success"] and batches[0]["id"] == summary["run_id"]
    assert (batches[0]["error_type"], batches[0]["error"]) == (None, None), "the kill's Interrupted error is gone"


# -- bad options -------------------------------------------------------------------------------------

FILES = {"in.jsonl": "".join(json.dumps(row) + "\n" for row in ticket_rows(3)), "in.txt": "x\n", "exists.jsonl": "x\n"}


def _batch(tool: str, *options: str, source: str = "in.jsonl", out: str = "o.jsonl") -> tuple[str, ...]:
    """``decirank batch TOOL {d}/SOURCE --out {d}/OUT OPTIONS...``."""
    return ("batch", tool, f"{{d}}/{source}", "--out", f"{{d}}/{out}", *options)


Q = ("-q", "Q")

# (id, arguments ({d} is the folder of FILES), what stderr must name)
CASES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("unknown-tool", _batch("sort"), ("TOOL", "sort")),
    ("no-out", ("batch", "filter", "{d}/in.jsonl", *Q), ("--out",)),
    ("input-extension", _batch("filter", *Q, source="in.txt"), ("INPUT", ".jsonl, .csv or .parquet")),
    ("input-missing", _batch("filter", *Q, source="none.jsonl"), ("INPUT", "does not exist")),
    ("out-extension", _batch("filter", *Q, out="o.json"), ("--out", "'.json'")),
    ("out-exists", _batch("filter", *Q, "-m", "lexical", out="exists.jsonl"), ("--out", "--overwrite")),
    ("no-question", _batch("filter"), ("--question",)),
    ("no-options", _batch("classify", *Q), ("--options",)),
    ("one-option", _batch("classify", *Q, "--options", "a"), ("--options", "1 options")),
    ("bad-options-json", _batch("classify", *Q, "--options", "[1, 2]"), ("--options.0",)),
    ("state-for-classify", _batch("classify", *Q, "--options", "a,b", "--state", "x"), ("--state", "filter")),
    ("no-query", _batch("rerank"), ("--query",)),
    ("text-and-describe", _batch("score", *Q, "--text", "a", "--describe", "b"), ("--text", "not both")),
    ("min-confidence", _batch("filter", *Q, "--min-confidence", "2"), ("--min-confidence",)),
    ("engine", _batch("filter", *Q, "--engine", "spark"), ("--engine",)),
    ("address-without-ray", _batch("filter", *Q, "--address", "x:1"), ("--address", "engine ray")),
    ("workers", _batch("filter", *Q, "--workers", "-1"), ("--workers",)),
    ("batch-size", _batch("filter", *Q, "--batch-size", "0"), ("--batch-size",)),
    ("unknown-model", _batch("filter", *Q, "-m", "nosuch:x"), ("nosuch",)),
    ("examples", _batch("filter", *Q, "--examples", "nosuchset"), ("--examples",)),
    ("errors-extension", _batch("filter", *Q, "--errors", "{d}/e.csv"), ("--errors", ".jsonl")),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad-batch")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    environment = {**os.environ, "DECIRANK_HOME": str(folder / "home")}

    def one(case):
        _, arguments, _ = case
        return run_cli(*(argument.replace("{d}", str(folder)) for argument in arguments), env=environment)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, CASES))
    return {case[0]: result for case, result in zip(CASES, results, strict=True)}


@pytest.mark.parametrize(("name", "named"), [(case[0], case[2]) for case in CASES], ids=[case[0] for case in CASES])
def test_a_bad_option_is_one_line_naming_it(outcomes, name, named):
    result = outcomes[name]
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for word in named:
        assert word in lines[0], lines[0]


def test_ctrl_c_says_how_far_the_batch_got_and_the_command_that_resumes_it(tmp_path):
    """SIGINT mid-batch exits 130 with the rows done and the command to rerun; that command finishes the batch.

    The model answers ten chunks, then holds every request until the test lets go, so the batch
    cannot finish before the signal, however fast or loaded the machine.
    """
    held = HeldAnswers(answered_at_once=10)
    with ScriptedServer() as server:
        url = server.script("s1", Reply(body=held))
        source = write_rows(tmp_path / "in.jsonl", ticket_rows(90))
        out = tmp_path / "out.jsonl"
        question = ("--question", "Is this about a payment?", "--text", "text")
        model = ("--model", "systemone:m", "--base-url", url)
        arguments = ["batch", "filter", str(source), "--out", str(out), *question, *model, "--workers", "0"]
        arguments += ["--batch-size", "3"]
        process = subprocess.Popen(
            [sys.executable, "-m", "decirank", *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            journal = tmp_path / "out.jsonl.progress" / "done.jsonl"
            deadline = time.monotonic() + 120
            while not (held.holding.is_set() and journal.exists() and journal.read_bytes().count(b"\n") >= 1):
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "the batch never reached the held answers"
                time.sleep(0.01)
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
        finally:
            held.release()
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, stderr
        assert "Traceback" not in stderr
        # The last two lines are the batch's own; a warning before them (a failover, say) is not the test's business.
        first, command = stderr.strip().splitlines()[-2:]
        assert first.startswith("interrupted: ") and "of 90 rows done, kept in " in first
        assert shlex.split(command)[:4] == ["decirank", "batch", "filter", str(source)]
        again = run_cli(*shlex.split(command)[1:], "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["resumed"] >= 3 and summary["answered"] == 90


def test_kept_only_writes_only_the_rows_filter_keeps(tmp_path):
    """--kept-only leaves out the rows filter drops; the kept rows are those of the full output."""
    source = write_rows(tmp_path / "in.jsonl", ticket_rows(60))
    dogs = ("--question", "Is this about a dog?", "--state", "dog", "--text", "text", "--model", "lexical")
    every = run_cli("batch", "filter", str(source), "--out", str(tmp_path / "all.jsonl"), *dogs, "--workers", "0")
    kept = run_cli(
        "batch", "filter", str(source), "--out", str(tmp_path / "kept.jsonl"), *dogs, "--workers", "0", "--kept-only"
    )
    assert every.returncode == kept.returncode == 0, kept.stderr
    all_rows = read_output(tmp_path / "all.jsonl")
    kept_rows = read_output(tmp_path / "kept.jsonl")
    assert kept_rows == [row for row in all_rows if row["kept"]]
    assert 0 < len(kept_rows) < len(all_rows)
    refused = run_cli(
        "batch", "score", str(source), "--out", str(tmp_path / "s.jsonl"), *FILTER, "--workers", "0", "--kept-only"
    )
    assert refused.returncode == 2 and "--kept-only" in refused.stderr
