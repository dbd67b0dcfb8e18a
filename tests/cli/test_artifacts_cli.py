"""``decirank artifacts`` and ``decirank score-list``, run as real subprocesses."""

from __future__ import annotations

import json
import os
import shlex
import sys

import pytest

from tests.cli._run import decirank


def test_put_get_ls_rm_round_trip(tmp_path, isolated_user_dir):
    """Text goes in from a file or stdin and comes back exactly; ls filters by prefix; rm removes."""
    source = tmp_path / "answer.json"
    source.write_text('{"answer": 42}\n', encoding="utf-8")
    assert decirank("artifacts", "put", "run1/agent-a", str(source)).returncode == 0
    put = decirank("artifacts", "put", "run1/agent-b", "-", input="ünïcode\n\nlines")
    assert put.returncode == 0, put.stderr
    assert decirank("artifacts", "put", "run2/agent-a", "-", input="other").returncode == 0
    assert (isolated_user_dir / "artifacts.db").is_file()

    assert decirank("artifacts", "get", "run1/agent-a").stdout == '{"answer": 42}\n'
    assert decirank("artifacts", "get", "run1/agent-b").stdout == "ünïcode\n\nlines"

    listed = decirank("artifacts", "ls", "run1/", "--json")
    assert [entry["ref"] for entry in json.loads(listed.stdout)] == ["run1/agent-a", "run1/agent-b"]
    table = decirank("artifacts", "ls")
    assert table.returncode == 0 and "run2/agent-a" in table.stdout and "3 artifact(s)" in table.stdout

    assert decirank("artifacts", "rm", "run1/agent-a").returncode == 0
    gone = decirank("artifacts", "get", "run1/agent-a")
    assert gone.returncode == 2 and "no artifact 'run1/agent-a'" in gone.stderr
    assert decirank("artifacts", "rm", "run1/agent-a").returncode == 2


def test_bad_refs_and_files_are_one_line_errors_naming_the_field(tmp_path):
    """A ref without a slash, a missing file and a file that is not UTF-8 text each exit 2 naming the field."""
    bad_ref = decirank("artifacts", "put", "no-slash", "-", input="x")
    assert bad_ref.returncode == 2 and bad_ref.stderr.startswith("error: ref: expected a ref 'run_id/agent_id'")
    assert "Traceback" not in bad_ref.stderr
    missing_file = decirank("artifacts", "put", "r/a", str(tmp_path / "nope.txt"))
    assert missing_file.returncode == 2 and "file:" in missing_file.stderr
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    not_text = decirank("artifacts", "put", "r/a", str(binary))
    assert not_text.returncode == 2 and "UTF-8" in not_text.stderr


def test_score_list_json_ranks_prunes_and_stamps(tmp_path):
    """An exec evaluator over stored refs; the stamps are there afterwards."""
    (tmp_path / "good.json").write_text("[1, 2]")
    (tmp_path / "bad.json").write_text("[1, 2")
    decirank("artifacts", "put", "run/good", str(tmp_path / "good.json"))
    decirank("artifacts", "put", "run/bad", str(tmp_path / "bad.json"))
    check = f'exec:{shlex.quote(sys.executable)} -c "import json,sys; json.load(open(sys.argv[1]))" {{artifact}}'
    refs = '["run/bad", {"ref": "run/good"}, "run/missing"]'
    done = decirank("score-list", "--refs", refs, "--evaluator", check, "--top-k", "1", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["winners"] == ["run/good"] and data["total"] == 3 and data["top_k"] == 1
    assert [(e["ref"], e["verdict"], e["pruned"]) for e in data["ranked"]] == [
        ("run/good", "VALID", False),
        ("run/bad", "INVALID", True),
        ("run/missing", "UNKNOWN", True),
    ]
    stamps = json.loads(decirank("artifacts", "stamps", "run/bad", "--json").stdout)
    assert [(s["run_id"], s["beam_rank"], s["pruned"]) for s in stamps] == [(data["run_id"], 2, True)]


def test_score_list_prints_a_table_and_reads_refs_from_stdin():
    """Refs piped on stdin are scored; the table ranks the valid one first and names the winners."""
    decirank("artifacts", "put", "t/a", "-", input="a: 1\n")
    decirank("artifacts", "put", "t/b", "-", input="a: [\n")
    done = decirank("score-list", "--refs", "-", "-e", "validate:yaml", input='["t/b", "t/a"]')
    assert done.returncode == 0, done.stderr
    header, *rows = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
    assert header == ["rank", "ref", "score", "verdict", "pruned", "issues"]
    assert "t/a" in rows[0] and "VALID" in rows[0]
    assert any("t/b" in row and "INVALID" in row for row in rows)
    assert "winners: t/a, t/b" in done.stdout


def test_score_list_reads_refs_from_a_json_lines_file(tmp_path):
    """A JSON Lines file of {"ref": ...} objects is read as the refs; a missing ref is UNKNOWN."""
    decirank("artifacts", "put", "f/a", "-", input="{}")
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"ref": "f/a"}\n{"ref": "f/b"}\n')
    done = decirank("score-list", "--refs", str(refs), "-e", "validate:json", "--json")
    assert done.returncode == 0, done.stderr
    assert [e["verdict"] for e in json.loads(done.stdout)["ranked"]] == ["VALID", "UNKNOWN"]


def test_a_registered_type_via_the_cli_is_judged_by_a_model():
    """types add registers a type (not over a built-in one), and validate:<type> asks the model about it."""
    added = decirank("artifacts", "types", "add", "recipe", "a cooking recipe with ingredients and steps")
    assert added.returncode == 0, added.stderr
    assert json.loads(decirank("artifacts", "types", "ls", "--json").stdout) == [
        {"name": "recipe", "description": "a cooking recipe with ingredients and steps"}
    ]
    refused = decirank("artifacts", "types", "add", "json", "anything")
    assert refused.returncode == 2 and "built-in" in refused.stderr
    decirank("artifacts", "put", "d/soup", "-", input="Soup recipe. Ingredients: onions, stock. Steps: cook them.")
    done = decirank("score-list", "--refs", '["d/soup"]', "-e", "validate:recipe", "--model", "lexical", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["model"] == "lexical:bm25" and data["ranked"][0]["verdict"] in {"VALID", "INVALID"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--refs", "[]", "-e", "validate:json"], "refs: expected at least one ref"),
        (["--refs", '["r/a"]', "-e", "shell:ls"], "evaluator: expected exec:<command>"),
        (["--refs", '["r/a"]', "-e", "validate:json", "--top-k", "-1"], "top_k:"),
        (["--refs", '["r/a"]', "-e", "validate:json", "--max-concurrency", "0"], "max_concurrency:"),
        (["--refs", '["bad"]', "-e", "validate:json"], "refs.0:"),
    ],
)
def test_score_list_bad_arguments_exit_2_with_the_field(arguments, message):
    """Each bad score-list argument is refused with exit 2 and a message naming its field."""
    done = decirank("score-list", *arguments)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_progress_label_with_braces_or_brackets_is_shown_as_text():
    """On a terminal, score-list's bar shows an exec: evaluator's {artifact} and [brackets] as they are."""
    decirank("artifacts", "put", "run/a", "-", input="[1]")
    evaluator = "exec:test -s {artifact} && echo [/done]"
    done = decirank("score-list", "--refs", '["run/a"]', "-e", evaluator, env={**os.environ, "TTY_COMPATIBLE": "1"})
    assert done.returncode == 0, done.stderr
    assert "VALID" in done.stdout and "Traceback" not in done.stderr
