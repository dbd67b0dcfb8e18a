"""``decirank eval labels``: a report per model as a table or JSON; bad input is one line and exit 2."""

from __future__ import annotations

import json
import os

import pytest

from decirank.cli import main
from decirank.errors import ServerError
from decirank.testing import ScriptedBackend, use_backend
from tests.cli._run import decirank
from tests.evaluation.test_labels import INTENT_ROWS, REVIEW_ROWS, write_jsonl


@pytest.fixture
def intents(tmp_path):
    return str(write_jsonl(tmp_path / "intents.jsonl", INTENT_ROWS))


def test_json_report_compares_models_side_by_side(intents):
    """--model twice: one entry per model; --none/--hold-out/--examples/--limit shape the task."""
    done = decirank(
        "eval", "labels", intents, "-m", "lexical", "--model", "lexical:bm25", "--none", "none of these",
        "--hold-out", "1", "--examples", "2", "--limit", "20", "--seed", "1", "--json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["type"] == "choice" and data["scored_rows"] == 20 and data["rows"] == 40
    assert data["options"] == 4 and len(data["held_out"]) == 1 and data["examples_per_question"] == 6
    assert [score["model"] for score in data["models"]] == ["lexical", "lexical:bm25"]
    for score in data["models"]:
        measures = {"accuracy", "macro_f1", "auroc", "brier", "ece", "oos_recall", "in_scope_accuracy"}
        assert measures | {"seconds_per_row"} <= set(score)
        assert score["rows"] == 20


def test_table_shows_a_column_per_model(tmp_path):
    reviews = str(write_jsonl(tmp_path / "reviews.jsonl", REVIEW_ROWS))
    done = decirank(
        "eval", "labels", reviews, "--type", "noul", "--question", "Is this movie review positive?",
        "--true", "a positive movie review", "--false", "a negative movie review", "-m", "lexical",
    )
    assert done.returncode == 0, done.stderr
    assert "noul: 20 of 20 rows scored, 2 labels" in done.stdout
    for measure in ("accuracy", "macro_f1", "auroc", "brier", "ece", "seconds_per_row"):
        assert measure in done.stdout
    assert "lexical" in done.stdout and "oos_recall" not in done.stdout


def test_topical_noul_from_the_command_line(intents):
    done = decirank(
        "eval", "labels", intents, "--type", "noul", "--question", "About {label}?", "-m", "lexical", "--json"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["topical"] is True and data["models"][0]["rows"] == 40


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.jsonl"], "does not exist"),
        (["BAD", "-m", "lexical"], "line 2"),
        (["DATA", "--type", "noul", "--options", "OPTIONS", "-m", "lexical"], "unknown label 'pin_blocked'"),
        (["DATA", "--examples", "11", "-m", "lexical"], "at most 10 examples per label"),
        (["DATA", "-m", "nosuchprovider:x"], "unknown model"),
        (["DATA", "--type", "yesno"], "Invalid value for '--type'"),
        (["DATA", "--limit", "0"], "Invalid value for '--limit'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, intents, arguments, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a", "label": "x"}\n{"text": \n')
    options = tmp_path / "options.json"
    options.write_text('["card_arrival", "pin_blocked"]')
    paths = {"DATA": intents, "BAD": str(bad), "OPTIONS": str(options)}
    done = decirank("eval", "labels", *[paths.get(argument, argument) for argument in arguments])
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""


def test_a_failed_model_call_is_one_line_and_no_report(intents, capsys):
    """A model that fails ends the eval with one line naming it; no figures are printed."""
    with use_backend(ScriptedBackend(error=ServerError("upstream fell over", status=503))) as model:
        code = main(["eval", "labels", intents, "-m", model, "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert f"{model} failed on line" in captured.err and "upstream fell over" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_a_model_without_its_key_is_reported_and_the_others_measured(intents):
    """-m lexical -m typesafe:jev-latest with no TYPESAFE_API_KEY: lexical is measured, typesafe reported."""
    env = {key: value for key, value in os.environ.items() if key != "TYPESAFE_API_KEY"}
    done = decirank("eval", "labels", intents, "-m", "lexical", "-m", "typesafe:jev-latest", "--json", env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [score["model"] for score in data["models"]] == ["lexical"] and data["models"][0]["rows"] == 40
    (failed,) = data["failed"]
    assert failed["model"] == "typesafe:jev-latest" and failed["error"]["type"] == "MissingKeyError"
    assert "warning: typesafe:jev-latest not measured" in done.stderr and "TYPESAFE_API_KEY" in done.stderr
    table = decirank("eval", "labels", intents, "-m", "lexical", "-m", "typesafe:jev-latest", env=env)
    assert table.returncode == 0 and "typesafe:jev-latest: not measured" in table.stdout


def test_a_model_whose_calls_fail_is_reported_and_the_others_measured(intents, capsys):
    """A model that fails mid-run is reported with its error; the model beside it is still measured."""
    with use_backend(ScriptedBackend(error=ServerError("upstream fell over", status=503))) as model:
        code = main(["eval", "labels", intents, "-m", model, "-m", "lexical", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert [score["model"] for score in data["models"]] == ["lexical"]
    assert data["failed"][0]["model"] == model and "upstream fell over" in data["failed"][0]["error"]["message"]
