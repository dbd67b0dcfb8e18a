"""``decirank calibrate``, ``decirank calibrations`` and the tools' ``--calibration``, as a user runs them."""

from __future__ import annotations

import json
import re

import pytest

import decirank
from decirank.cli import main
from tests.calibration_rows import KIND_QUESTION, KINDS, PET_QUESTION, PET_STATE, kind_rows, pet_rows
from tests.cli._run import decirank as run_decirank

#: A batch big enough for a recall promise to afford a cut-off (a promise about a handful of items keeps them all).
ITEMS = ["a cat at noon", "a lamp by the door", "a puppy on the sofa", "a kettle in the garden"] * 10


@pytest.fixture
def files(tmp_path):
    """The labelled rows as JSON Lines, classify's as a JSON array, and the items to filter."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in pet_rows()), encoding="utf-8")
    kinds = tmp_path / "kinds.json"
    kinds.write_text(json.dumps(kind_rows()), encoding="utf-8")
    items = tmp_path / "items.json"
    items.write_text(json.dumps(ITEMS), encoding="utf-8")
    few = tmp_path / "few.jsonl"
    few.write_text("".join(json.dumps(row) + "\n" for row in pet_rows(12)), encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    rows_with_a_bad_answer = [*pet_rows()[:3], {"item": "a cat", "answer": "yes"}, *pet_rows()[4:]]
    bad.write_text("".join(json.dumps(row) + "\n" for row in rows_with_a_bad_answer), encoding="utf-8")
    return {"rows": str(rows), "kinds": str(kinds), "items": str(items), "few": str(few), "bad": str(bad)}


def test_calibrate_from_a_jsonl_file_then_list_show_filter_and_remove(files):
    """A calibration made from a file prints its reliability table; filter --target-recall prints its promise."""
    made = run_decirank("calibrate", "pets", files["rows"], "-q", PET_QUESTION, "-s", PET_STATE, "-m", "lexical")
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    assert lines[0].split("\t") == [
        "bin",
        "rows",
        "mean p",
        "frequency",
        "rows after",
        "mean p after",
        "frequency after",
    ]
    stored = decirank.CalibrationStore().get("pets")
    before, after = stored.before.to_dict(), stored.after.to_dict()
    # One line per bin that holds a row, its counts adding up to the rows.
    table = [line.split("\t") for line in lines[1:] if re.fullmatch(r"\d\.\d-\d\.\d", line.split("\t")[0])]
    assert sum(int(row[1]) for row in table) == 40 and sum(int(row[4]) for row in table) == 40
    assert f"ECE    {before['ece']:.4f} -> {after['ece']:.4f}" in lines
    assert f"Brier  {before['brier']:.4f} -> {after['brier']:.4f}" in lines
    assert any(line.startswith(f"method {stored.map.method} (cross-validated log loss: identity ") for line in lines)
    assert f"pets: filter of lexical:bm25 on {PET_QUESTION!r} (40 rows, 20 yes)" in lines
    assert made.stderr == "stored calibration pets; use it with --calibration pets\n"

    measured = run_decirank(
        "calibrate",
        "scratch",
        "-",
        "-q",
        PET_QUESTION,
        "-s",
        PET_STATE,
        "-m",
        "lexical",
        "--no-save",
        "--json",
        input=json.dumps(pet_rows()),
    )
    assert measured.returncode == 0, measured.stderr
    data = json.loads(measured.stdout)
    assert data["saved"] is False and data["data_hash"] == stored.data_hash
    assert decirank.CalibrationStore().names() == ["pets"]

    listed = run_decirank("calibrations", "list")
    assert listed.returncode == 0 and "pets\tfilter\tlexical:bm25\t40\t" in listed.stdout
    assert "1 calibration(s)" in listed.stdout
    assert json.loads(run_decirank("calibrations", "list", "--json").stdout) == [stored.summary()]
    assert json.loads(run_decirank("calibrations", "show", "pets", "--json").stdout) == stored.summary()
    assert f"ECE    {before['ece']:.4f} -> {after['ece']:.4f}" in run_decirank("calibrations", "show", "pets").stdout

    kept = run_decirank(
        "filter",
        files["items"],
        "-q",
        PET_QUESTION,
        "-s",
        PET_STATE,
        "-m",
        "lexical",
        "--calibration",
        "pets",
        "--target-recall",
        "0.8",
    )
    assert kept.returncode == 0, kept.stderr
    promise = decirank.filter(ITEMS, PET_QUESTION, PET_STATE, model="lexical", calibration="pets", target_recall=0.8)
    cutoff = promise.promise
    assert kept.stdout.splitlines()[0].split("\t") == ["#", "kept", "probability", "raw", "item"]
    assert (
        f"promise: recall >= 0.8 with confidence 0.9 on new items; cut-off: model probability >= {cutoff.threshold:.4f}"
        in kept.stdout
    )
    assert f"on the calibration's 40 labelled rows: recall {cutoff.observed_recall:.3f}, precision " in kept.stdout
    assert "kept 20, dropped 20 (the promise's cut-off, calibrated by pets)" in kept.stdout
    as_json = run_decirank(
        "filter",
        files["items"],
        "-q",
        PET_QUESTION,
        "-s",
        PET_STATE,
        "-m",
        "lexical",
        "--calibration",
        "pets",
        "--target-recall",
        "0.8",
        "--confidence",
        "0.8",
        "--json",
    )
    data = json.loads(as_json.stdout)
    assert data["promise"]["confidence"] == 0.8 and data["items"] == ["a cat at noon", "a puppy on the sofa"] * 10

    removed = run_decirank("calibrations", "remove", "pets")
    assert removed.returncode == 0 and removed.stderr == "removed calibration pets\n"
    again = run_decirank("calibrations", "remove", "pets")
    assert again.returncode == 2
    assert again.stderr == (
        "error: NAME: expected a stored calibration (no calibration 'pets'; none stored; decirank calibrate NAME "
        "ROWS stores one)\n"
    )


def test_score_rerank_and_classify_print_calibrated_numbers_and_prediction_sets(files, capsys):
    """score shows the raw probability beside the calibrated one, rerank names its calibration, classify its sets."""
    assert main(["calibrate", "pet-score", files["rows"], "-q", PET_QUESTION, "-t", "score", "-m", "lexical"]) == 0
    assert main(["calibrate", "pet-rerank", files["rows"], "-q", PET_STATE, "-t", "rerank", "-m", "lexical"]) == 0
    kinds = [
        "calibrate",
        "kinds",
        files["kinds"],
        "-q",
        KIND_QUESTION,
        "-t",
        "classify",
        "--options",
        json.dumps(KINDS),
    ]
    assert main([*kinds, "-m", "lexical"]) == 0
    capsys.readouterr()

    assert main(["score", files["items"], "-q", PET_QUESTION, "-m", "lexical", "--calibration", "pet-score"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split("\t") == ["#", "probability", "raw", "text"]
    assert "probabilities calibrated by pet-score" in out

    assert main(["rerank", files["items"], "-q", PET_STATE, "-m", "lexical", "--calibration", "pet-rerank"]) == 0
    assert "relevance calibrated by pet-rerank" in capsys.readouterr().out

    classify = ["classify", files["items"], "-q", KIND_QUESTION, "--options", json.dumps(KINDS), "-m", "lexical"]
    assert main([*classify, "--calibration", "kinds", "--coverage", "0.8"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split("\t") == ["#", "choice", "probability", "set", "text"]
    first = out.splitlines()[1].split("\t")
    assert first[:2] == ["0", "pet"] and first[3].split(", ")[0] == "pet"  # the set, most probable first
    assert "prediction sets hold the right option for at least 0.8 of new texts, with confidence 0.9 (30 labelled" in out
    assert "probabilities calibrated by kinds" in out


def _pets() -> None:
    decirank.calibrate(pet_rows(), PET_QUESTION, name="pets", state=PET_STATE, model="lexical")


FILTER = ["filter", "{items}", "-q", PET_QUESTION, "-s", PET_STATE, "-m", "lexical"]
CALIBRATE = ["calibrate", "x", "{rows}", "-q", PET_QUESTION, "-m", "lexical"]


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (
            [*FILTER, "--target-recall", "0.9"],
            (
                "error: --calibration: expected the name of a stored calibration, "
                "which --target-recall picks its cut-off from"
            ),
        ),
        (
            [*FILTER, "--calibration", "nope"],
            (
                "error: --calibration: expected the name of a stored calibration (decirank calibrate) "
                "(no calibration 'nope'; known: pets)"
            ),
        ),
        (
            [*FILTER, "--calibration", "pets", "--target-recall", "1.5"],
            "error: --target-recall: expected a number from 0 to 1, got float 1.5",
        ),
        (
            [*FILTER, "--calibration", "pets", "--target-recall", "0.9", "--target-precision", "0.9"],
            "error: --target-recall: expected one target: --target-recall or --target-precision, not both",
        ),
        (
            [*FILTER, "--calibration", "pets", "--target-recall", "0.9", "--min-confidence", "0.5"],
            "error: --min-confidence: expected no --min-confidence with a target",
        ),
        (
            [*FILTER[:-1], "local", "--calibration", "pets"],
            (
                "error: --calibration: expected a calibration fitted for the model local:default "
                "('pets' was fitted for lexical:bm25"
            ),
        ),
        (
            ["filter", "{items}", "-q", "Is this a vehicle?", "-m", "lexical", "--calibration", "pets"],
            "error: --calibration: expected a calibration fitted for this question",
        ),
        (
            [
                "classify",
                "{items}",
                "-q",
                KIND_QUESTION,
                "--options",
                "pet,thing",
                "-m",
                "lexical",
                "--coverage",
                "0.9",
            ],
            "error: --calibration: expected the name of a stored calibration, which coverage needs",
        ),
        (
            ["score", "{items}", "-q", PET_QUESTION, "-m", "lexical", "--calibration", "pets"],
            "error: --calibration: expected a calibration fitted for score ('pets' was fitted for filter)",
        ),
        (
            ["calibrate", "x", "{few}", "-q", PET_QUESTION, "-m", "lexical"],
            "error: ROWS: expected at least 20 labelled",
        ),
        (["calibrate", "x", "{bad}", "-q", PET_QUESTION, "-m", "lexical"], "error: ROWS.3.answer: expected true or"),
        ([*CALIBRATE, "--tool", "rank"], "error: --tool: expected one of filter, score, rerank, classify"),
        ([*CALIBRATE, "--method", "temperature"], "error: --method: expected auto or one of identity, platt, isotonic"),
        ([*CALIBRATE, "--options", "a,b"], "error: --options: expected no options for filter"),
        (["calibrate", "x", "{rows}", "-m", "lexical"], "error: --question: expected"),
        (["calibrate", "../x", "{rows}", "-q", PET_QUESTION, "-m", "lexical"], "error: NAME: expected"),
        (
            ["calibrate", "x", "missing.jsonl", "-q", PET_QUESTION],
            "error: ROWS: expected a JSON or JSON Lines file of examples, or a stored example set's name",
        ),
        (["calibrations", "show", "nope"], "error: NAME: expected a stored calibration (no calibration 'nope'; known"),
    ],
)
def test_bad_input_is_one_line_naming_the_field_and_exit_2(files, capsys, args, start):
    """Each misuse of a calibration, or bad rows, is one ``error:`` line on stderr naming the field; exit 2."""
    _pets()
    code = main([arg.format(**files) if arg.startswith("{") else arg for arg in args])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.startswith(start), captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert decirank.CalibrationStore().names() == ["pets"]  # nothing stored by a refused call
