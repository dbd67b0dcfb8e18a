"""``decirank eval trec``'s arguments, refused before any file is read."""

from __future__ import annotations

import pytest

from tests.cli._run import decirank


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--tool", "sort"], "Invalid value for '--tool'"),
        (["--queries", "0"], "Invalid value for '--queries'"),
        (["--queries", "-1"], "Invalid value for '--queries'"),
    ],
)
def test_a_bad_tool_or_query_count_is_one_line_and_exit_2(option, message):
    """Only rank and rerank are measured, on at least one query; anything else is one line and exit 2."""
    done = decirank("eval", "trec", "missing-run.json", "missing-qrels.txt", *option)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
