"""decirank runs off/on, status and prune, as a user runs them."""

from __future__ import annotations

import json
import os

from tests.cli._run import decirank

RANK = ("rank", "examples/papers.json", "--instructions", "Which paper fits?", "--model", "lexical")


def test_off_stops_recording_and_on_resumes(isolated_user_dir):
    assert decirank(*RANK).returncode == 0
    assert "1 run(s)" in decirank("runs", "status").stdout
    off = decirank("runs", "off")
    assert off.returncode == 0 and "off" in off.stdout
    assert decirank(*RANK).returncode == 0
    assert "off" in decirank("runs", "status").stdout
    assert decirank("runs", "on").returncode == 0
    status = json.loads(decirank("runs", "status", "--json").stdout)
    assert status["on"] is True and status["runs"] == 1, "the call made while off was not recorded"


def test_status_names_size_rows_oldest_and_the_settings(isolated_user_dir):
    assert decirank(*RANK).returncode == 0
    shown = decirank("runs", "status", env={**os.environ, "DECIRANK_RUNLOG_TEXTS": "hashes"})
    assert shown.returncode == 0, shown.stderr
    for part in ("runs.db", "MB", "1 run(s)", "oldest run", "SHA-256 and length", "retention"):
        assert part in shown.stdout, (part, shown.stdout)


def test_prune_older_than_removes_runs_and_says_how_many(isolated_user_dir):
    assert decirank(*RANK).returncode == 0
    kept = decirank("runs", "prune", "--older-than", "30d", "--json")
    assert kept.returncode == 0 and json.loads(kept.stdout)["runs"] == 0
    pruned = json.loads(decirank("runs", "prune", "--older-than", "0.001s", "--json").stdout)
    assert pruned["runs"] >= 2 and pruned["runs_left"] == 0
    bad = decirank("runs", "prune", "--older-than", "soon")
    assert bad.returncode == 2 and "--older-than" in bad.stderr
    assert decirank("runs", "prune").returncode == 2
