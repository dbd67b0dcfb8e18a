"""decirank batch with a stored calibration and filter's recall and precision targets.

The maps are fitted by ``decirank.calibrate`` on made-up support messages (seeded templates,
:mod:`tests.calibration_rows`) into the test's own DECIRANK_HOME: the first 100 messages are
labelled rows, the other 200 the batch's input, their labels kept beside them to measure
the promise. The embedded model answers where the numbers matter, the lexical one where
only the plumbing does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import decirank
from decirank.calibration import recall_cutoff
from decirank.errors import InvalidInputError
from decirank.stores.runlog import current_runlog
from tests.calibration_rows import SUPPORT_QUESTION as QUESTION
from tests.calibration_rows import support_rows
from tests.cli._run import decirank as run_cli

from .conftest import Stop, interrupt_after, read_output, write_rows

#: Labelled rows a map is fitted on; the rest of the seeded messages are the batch's input.
FITTED = 100


@pytest.fixture(scope="module")
def messages() -> list[dict]:
    return support_rows(300, 0)


@pytest.fixture
def held_out(tmp_path, messages) -> Path:
    """The 200 messages not fitted on, as JSON Lines ``{"id", "text", "problem"}`` (the label rides along)."""
    rows = [
        {"id": index, "text": row["item"], "problem": row["answer"]}
        for index, row in enumerate(messages[FITTED:], start=FITTED)
    ]
    return write_rows(tmp_path / "messages.jsonl", rows)


def _texts(path: Path) -> list[str]:
    return [row["text"] for row in read_output(path)]


def test_a_recall_target_holds_on_held_out_rows_with_one_cut_off_for_the_whole_input(tmp_path, messages, held_out):
    stored = decirank.calibrate(messages[:FITTED], QUESTION, name="gate", model="local").calibration
    out = tmp_path / "out.jsonl"
    # Chunks of 10: a cut-off chosen per chunk would be for 10 items, too few to afford one (it keeps all).
    result = decirank.batch(
        "filter",
        held_out,
        out,
        question=QUESTION,
        text="text",
        model="local",
        calibration="gate",
        target_recall=0.9,
        workers=0,
        batch_size=10,
    )
    assert recall_cutoff(stored.scores, stored.labels, 0.9, 0.9, batch_size=10).threshold is None
    expected = recall_cutoff(stored.scores, stored.labels, 0.9, 0.9, batch_size=200)
    assert result.calibration == "gate" and result.promise == expected and expected.threshold is not None

    written = read_output(out)
    tool = decirank.filter(_texts(held_out), QUESTION, model="local", calibration="gate")
    assert [row["probability"] for row in written] == pytest.approx([d.probability for d in tool.decisions], abs=1e-9)
    assert [row["raw_probability"] for row in written] == pytest.approx(
        [d.raw_probability for d in tool.decisions], abs=1e-9
    )
    assert list(written[0])[-3:] == ["probability", "raw_probability", "kept"]
    assert all(row["kept"] == (row["raw_probability"] >= expected.threshold) for row in written)
    problems = [row for row in written if row["problem"]]
    assert sum(row["kept"] for row in problems) / len(problems) >= 0.9
    assert not all(row["kept"] for row in written)  # a real cut, not "keep everything"

    # The batch's run states the promise; each chunk's filter run names the map and keeps the same cut-off.
    runlog = current_runlog()
    run = runlog.run(result.run_id)
    assert run["inputs"]["promise"] == expected.to_dict() == run["outputs"]["promise"]
    assert run["inputs"]["job"]["calibration"] == {"name": "gate", "data_hash": stored.data_hash}
    chunks = [runlog.run(child["id"]) for child in run["children"] if child["tool"] == "filter"]
    assert len(chunks) == 20
    for chunk in chunks:
        assert chunk["inputs"]["calibration"] == {"name": "gate", "data_hash": stored.data_hash}
        assert chunk["inputs"]["promise"]["threshold"] == expected.threshold


def test_score_classify_and_rerank_batches_give_the_tools_calibrated_numbers(tmp_path, messages, held_out):
    texts = _texts(held_out)
    decirank.calibrate(messages[:FITTED], QUESTION, name="scores", tool="score", model="lexical")
    scored = decirank.batch(
        "score",
        held_out,
        tmp_path / "s.jsonl",
        question=QUESTION,
        text="text",
        model="lexical",
        calibration="scores",
        workers=0,
    )
    tool = decirank.score(texts, QUESTION, model="lexical", calibration="scores")
    written = read_output(tmp_path / "s.jsonl")
    assert scored.calibration == "scores" and scored.promise is None
    assert [row["probability"] for row in written] == pytest.approx(tool.probabilities, abs=1e-12)
    assert [row["raw_probability"] for row in written] == pytest.approx(tool.raw_probabilities, abs=1e-12)

    options = {"problem": "the customer reports a problem", "fine": "the customer is happy or asks something"}
    kinds = [{"item": row["item"], "answer": "problem" if row["answer"] else "fine"} for row in messages[:FITTED]]
    decirank.calibrate(kinds, "What is this message?", name="kinds", tool="classify", options=options, model="lexical")
    decirank.batch(
        "classify",
        held_out,
        tmp_path / "c.jsonl",
        question="What is this message?",
        options=options,
        text="text",
        model="lexical",
        calibration="kinds",
        workers=0,
    )
    chosen = decirank.classify(texts, "What is this message?", options, model="lexical", calibration="kinds")
    written = read_output(tmp_path / "c.jsonl")
    assert [row["choice"] for row in written] == [d.choice for d in chosen.decisions]
    assert [row["probability"] for row in written] == pytest.approx([d.probability for d in chosen.decisions])

    query = "a broken or late order"
    decirank.calibrate(messages[:FITTED], query, name="relevance", tool="rerank", model="lexical")
    decirank.batch(
        "rerank",
        held_out,
        tmp_path / "r.jsonl",
        query=query,
        text="text",
        model="lexical",
        calibration="relevance",
        workers=0,
    )
    reranked = decirank.rerank(query, texts, model="lexical", calibration="relevance")
    by_text = {document.document: document for document in reranked.results}
    written = read_output(tmp_path / "r.jsonl")
    assert [row["relevance_score"] for row in written] == pytest.approx(
        [by_text[row["text"]].relevance_score for row in written]
    )


def test_worker_processes_apply_the_drivers_map_and_cut_off(tmp_path, messages, held_out):
    """The map travels to the workers in the task: a process that could not find it by name still applies it."""
    decirank.calibrate(messages[:FITTED], QUESTION, name="lex", model="lexical")
    options = {"question": QUESTION, "text": "text", "model": "lexical", "calibration": "lex", "target_recall": 0.8}
    inline = decirank.batch("filter", held_out, tmp_path / "inline.jsonl", workers=0, batch_size=25, **options)
    pooled = decirank.batch("filter", held_out, tmp_path / "pooled.jsonl", workers=2, batch_size=25, **options)
    assert (pooled.engine, pooled.workers) == ("local", 2) and pooled.promise == inline.promise
    assert (tmp_path / "pooled.jsonl").read_bytes() == (tmp_path / "inline.jsonl").read_bytes()


def test_resuming_with_another_calibration_or_target_is_refused(tmp_path, messages, held_out):
    decirank.calibrate(messages[:FITTED], QUESTION, name="lex", model="lexical")
    decirank.calibrate(messages[50:150], QUESTION, name="other", model="lexical")
    out = tmp_path / "out.jsonl"
    settings = {"question": QUESTION, "text": "text", "model": "lexical", "workers": 0, "batch_size": 25}
    with pytest.raises(Stop):
        decirank.batch(
            "filter", held_out, out, calibration="lex", target_recall=0.9, on_progress=interrupt_after(1), **settings
        )
    for changed in (
        {},
        {"calibration": "other", "target_recall": 0.9},
        {"calibration": "lex"},
        {"calibration": "lex", "target_recall": 0.8},
        {"calibration": "lex", "target_recall": 0.9, "confidence": 0.95},
    ):
        with pytest.raises(InvalidInputError, match="differs in the question, options and calibration"):
            decirank.batch("filter", held_out, out, **changed, **settings)
    # The same name fitted again on other rows is another map: its hash differs.
    decirank.calibrate(messages[:90], QUESTION, name="lex", model="lexical")
    with pytest.raises(InvalidInputError, match="differs in the question, options and calibration"):
        decirank.batch("filter", held_out, out, calibration="lex", target_recall=0.9, **settings)
    decirank.calibrate(messages[:FITTED], QUESTION, name="lex", model="lexical")
    resumed = decirank.batch("filter", held_out, out, calibration="lex", target_recall=0.9, **settings)
    whole = decirank.batch(
        "filter", held_out, tmp_path / "whole.jsonl", calibration="lex", target_recall=0.9, **settings
    )
    assert resumed.resumed == 25 and resumed.promise == whole.promise
    assert out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()


def test_bad_calibrations_and_targets_name_the_field_before_any_work(tmp_path, messages, held_out):
    decirank.calibrate(messages[:FITTED], QUESTION, name="lex", model="lexical")
    decirank.calibrate(messages[:FITTED], QUESTION, name="lex-score", tool="score", model="lexical")
    decirank.calibrate(messages[:FITTED], "a broken order", name="one-query", tool="rerank", model="lexical")
    filter_on = {"tool": "filter", "question": QUESTION}
    cases = [
        ({**filter_on, "calibration": "nosuch"}, "calibration", "no calibration 'nosuch'; known: lex"),
        ({**filter_on, "calibration": "lex-score"}, "calibration", "fitted for score"),
        ({"tool": "filter", "question": "Is this about money?", "calibration": "lex"}, "calibration", "fitted for"),
        ({**filter_on, "calibration": "lex", "model": "local"}, "calibration", "lexical:bm25"),
        ({"tool": "rerank", "query_field": "text", "calibration": "one-query"}, "calibration", "any query"),
        ({"tool": "rerank", "query": "a late parcel", "calibration": "one-query"}, "calibration", "fitted for"),
        ({**filter_on, "target_recall": 0.9}, "calibration", "target_recall picks its cut-off"),
        ({**filter_on, "calibration": "lex", "target_recall": 1.0}, "target_recall", "between 0 and 1"),
        ({**filter_on, "calibration": "lex", "target_recall": 0.9, "target_precision": 0.9}, "target_recall", "both"),
        ({**filter_on, "calibration": "lex", "target_recall": 0.9, "confidence": 1.5}, "confidence", ""),
        ({**filter_on, "calibration": "lex", "target_recall": 0.9, "min_confidence": 0.3}, "min_confidence", ""),
        ({**filter_on, "calibration": "lex", "target_precision": 0.999}, "target_precision", "no cut-off"),
        ({"tool": "score", "question": QUESTION, "target_recall": 0.9}, "target_recall", "for filter, not score"),
    ]
    for options, field, words in cases:
        settings = {"text": "text", "model": "lexical", "workers": 0, **options}
        with pytest.raises(InvalidInputError) as raised:
            decirank.batch(settings.pop("tool"), held_out, tmp_path / "out.jsonl", **settings)
        assert raised.value.field == field and words in str(raised.value), (options, str(raised.value))
        assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.jsonl.progress").exists()
    assert current_runlog().runs(tool="batch", limit=None) == []


# -- the command line -------------------------------------------------------------------------------


def test_the_command_states_the_promise_and_writes_calibrated_rows(tmp_path, messages, held_out):
    stored = decirank.calibrate(messages[:FITTED], QUESTION, name="gate", model="local").calibration
    common = ("--question", QUESTION, "--text", "text", "--model", "local", "--workers", "0")
    asked = ("--calibration", "gate", "--target-recall", "0.9")
    done = run_cli("batch", "filter", str(held_out), "--out", str(tmp_path / "out.jsonl"), *common, *asked, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    expected = recall_cutoff(stored.scores, stored.labels, 0.9, 0.9, batch_size=200)
    assert summary["calibration"] == "gate" and summary["promise"] == expected.to_dict()
    written = read_output(tmp_path / "out.jsonl")
    tool = decirank.filter(_texts(held_out), QUESTION, model="local", calibration="gate", target_recall=0.9)
    assert [row["probability"] for row in written] == pytest.approx([d.probability for d in tool.decisions], abs=1e-9)
    assert all("raw_probability" in row for row in written)
    problems = [row for row in written if row["problem"]]
    assert sum(row["kept"] for row in problems) / len(problems) >= 0.9

    shown = run_cli("batch", "filter", str(held_out), "--out", str(tmp_path / "again.jsonl"), *common, *asked)
    assert shown.returncode == 0, shown.stderr
    assert f"cut-off: model probability >= {expected.threshold:.4f}" in shown.stdout
    assert "promise: recall >= 0.9 with confidence 0.9" in shown.stdout
    assert "probabilities calibrated by gate" in shown.stdout


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (("--calibration", "nosuch"), ("--calibration", "no calibration 'nosuch'")),
        (("--calibration", "lex", "--model", "local"), ("--calibration", "lexical:bm25")),
        (("--target-recall", "0.9"), ("--calibration", "which --target-recall picks")),
        (("--calibration", "lex", "--target-recall", "1.5"), ("--target-recall",)),
        (("--calibration", "lex", "--target-recall", "0.9", "--target-precision", "0.9"), ("--target-recall", "both")),
        (("--calibration", "lex", "--target-recall", "0.9", "--confidence", "1"), ("--confidence",)),
    ],
    ids=["unknown", "other-model", "no-calibration", "out-of-range", "both-targets", "confidence"],
)
def test_a_bad_calibration_option_is_one_line_naming_it(tmp_path, messages, held_out, options, named):
    decirank.calibrate(messages[:FITTED], QUESTION, name="lex", model="lexical")
    out = tmp_path / "out.jsonl"
    done = run_cli("batch", "filter", str(held_out), "--out", str(out), "-q", QUESTION, "-m", "lexical", *options)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr
    for word in named:
        assert word in lines[0], lines[0]
    assert not out.exists() and not (tmp_path / "out.jsonl.progress").exists()
