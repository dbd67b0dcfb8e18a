"""What the command line prints: its version, tables that fit a terminal and stay whole in a pipe, --state's JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import decirank as api
from tests.cli._run import PAPERS, decirank

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _terminal(*args: str) -> subprocess.CompletedProcess[str]:
    """``decirank *args`` as on an 80-column terminal (rich draws for a terminal when TTY_COMPATIBLE is set)."""
    env = {**os.environ, "TTY_COMPATIBLE": "1", "COLUMNS": "80"}
    command = [sys.executable, "-m", "decirank", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_version_prints_the_package_version():
    """decirank --version prints the installed version and exits 0."""
    done = decirank("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"decirank {api.__version__}"


def test_a_piped_table_is_plain_tab_separated_lines():
    """Off a terminal a table is a header and one line per row, tab-separated, with whole run ids."""
    ranked = json.loads(
        decirank("rank", str(PAPERS), "-i", "Which paper?", "-s", '"CPU"', "-m", "lexical", "--json").stdout
    )
    done = decirank("runs", "list")
    assert done.returncode == 0, done.stderr
    header, *rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert header == ["id", "started", "tool", "model", "status", "duration", "tokens", "cost"]
    assert rows[0][0] == ranked["run_id"][:12] and rows[0][3] == "lexical:bm25"
    shown = decirank("rank", str(PAPERS), "-i", "Which paper?", "-s", '"CPU"', "-m", "lexical", "-d", "title")
    lines = shown.stdout.splitlines()
    assert lines[0].split("\t") == ["rank", "#", "probability", "item"], "the bar column is left out"
    assert len(lines[1].split("\t")) == 4 and "█" not in shown.stdout


def test_tables_fit_80_columns_without_splitting_ids():
    """On an 80-column terminal no line of runs list or models is wider, and each run id stays on one line."""
    ranked = json.loads(
        decirank("rank", str(PAPERS), "-i", "Which paper?", "-s", '"CPU"', "-m", "lexical", "--json").stdout
    )
    for args in (("runs", "list"), ("models",), ("runs", "stats"), ("runs", "show", ranked["run_id"])):
        done = _terminal(*args)
        assert done.returncode == 0, done.stderr
        lines = [ANSI.sub("", line) for line in done.stdout.splitlines()]
        assert max(len(line) for line in lines) <= 80, (args, lines)
    listed = [ANSI.sub("", line) for line in _terminal("runs", "list").stdout.splitlines()]
    assert any(line.startswith(ranked["run_id"][:12] + " ") for line in listed)


def test_state_that_opens_like_json_but_is_not_is_an_error_naming_the_flag():
    """--state '{question: CPU}' exits 2 naming --state and showing how to pass it as a plain string."""
    done = decirank("rank", str(PAPERS), "-i", "Which paper?", "-s", "{question: CPU}", "-m", "lexical")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --state:")
    assert "--state '\"{question: CPU}\"'" in done.stderr
    as_string = decirank("rank", str(PAPERS), "-i", "Which?", "-s", '"{question: CPU}"', "-m", "lexical", "--json")
    assert as_string.returncode == 0, as_string.stderr
    plain = decirank("rank", str(PAPERS), "-i", "Which?", "-s", "CPU reranking", "-m", "lexical", "--json")
    assert plain.returncode == 0, plain.stderr
