"""``decirank runs``: list, show, stats and path, run as a user would, in subprocesses."""

from __future__ import annotations

import json
import os

import pytest

import decirank as api
from decirank.stores.runlog import current_runlog
from tests.cli._run import decirank


@pytest.fixture
def recorded():
    """Two recorded runs, a rank that worked then a rerank that failed; the rank's id."""
    ranked = api.rank(["a cat that purrs", "a car that honks"], "Which one purrs?", "pets", model="lexical")
    with pytest.raises(api.UnknownModelError):
        api.rerank("q", ["a"], model="nobody")
    current_runlog().flush()
    return ranked.run_id


def test_list_shows_runs_newest_first_and_filters(recorded):
    """runs list gives the newest run first and filters by tool and status; the table shows ids and models."""
    listed = decirank("runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [(run["tool"], run["status"]) for run in runs] == [("rerank", "failed"), ("rank", "success")]
    assert runs[1]["id"] == recorded
    only_rank = json.loads(decirank("runs", "list", "--tool", "rank", "--json").stdout)
    assert [run["id"] for run in only_rank] == [recorded]
    failed = json.loads(decirank("runs", "list", "--status", "failed", "--limit", "1", "--json").stdout)
    assert [run["error_type"] for run in failed] == ["UnknownModelError"]
    table = decirank("runs", "list")
    assert recorded[:12] in table.stdout and "lexical:bm25" in table.stdout


def test_show_gives_the_run_its_model_calls_and_their_requests(recorded):
    """runs show takes an id prefix and gives the run's inputs and each model call with its request and answers."""
    shown = decirank("runs", "show", recorded[:10], "--json")
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)
    assert run["id"] == recorded and run["inputs"]["instructions"] == "Which one purrs?"
    (child,) = run["children"]
    assert (child["model"], child["decision"], child["attempt"]) == ("lexical:bm25", 1, 1)
    assert child["request"]["state"] == "pets" and child["answers"]["rank"]["type"] == "choice"
    human = decirank("runs", "show", recorded)
    assert "lexical:bm25" in human.stdout and "success" in human.stdout and "1.1" in human.stdout


def test_stats_count_runs_and_give_latency_per_model(recorded):
    """runs stats counts the runs and gives calls and latency per model."""
    stats = json.loads(decirank("runs", "stats", "--json").stdout)
    assert stats["runs"] == 2
    (lexical,) = stats["models"]
    assert lexical["model"] == "lexical:bm25" and lexical["calls"] == 1 and lexical["p95_ms"] > 0
    human = decirank("runs", "stats")
    assert "2 run(s)" in human.stdout and "lexical:bm25" in human.stdout


def test_path_names_the_file_or_says_off(isolated_user_dir):
    """runs path prints the log's file, 'off', or a database URL with its password hidden."""
    assert decirank("runs", "path").stdout.strip() == str(isolated_user_dir / "runs.db")
    assert decirank("runs", "path", env={**os.environ, "DECIRANK_RUNLOG": "off"}).stdout.strip() == "off"
    postgres = {**os.environ, "DECIRANK_DATABASE_URL": "postgresql://me:s3cret@db:5432/runs"}
    hidden = decirank("runs", "path", env=postgres)
    assert hidden.stdout.strip() == "postgresql://me:***@db:5432/runs"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("runs", "show", "0000000000"), {}, "no run has that id"),
        (("runs", "list", "--status", "done"), {}, "status: expected one of"),
        (("runs", "list"), {"DECIRANK_RUNLOG": "off"}, "the run log is off"),
        (("runs", "list"), {"DECIRANK_DATABASE_URL": "mysql://x"}, "DECIRANK_DATABASE_URL"),
    ],
)
def test_mistakes_are_one_line_on_stderr_with_exit_2(args, env, message):
    """An unknown id, a bad status, a log that is off or a bad database URL: one line, exit 2."""
    outcome = decirank(*args, env={**os.environ, **env})
    assert outcome.returncode == 2
    assert message in outcome.stderr
    assert "Traceback" not in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1
