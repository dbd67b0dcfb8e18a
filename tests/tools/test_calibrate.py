"""calibrate and the tools that use its maps, on the real embedded model and hand-made support messages.

The messages are built from seeded templates (no data set ships with the tests): a
customer reporting a problem or not, and the team a message belongs to. The model
reads every one; nothing here is scripted.
"""

from __future__ import annotations

import numpy as np
import pytest

import decirank
from decirank.calibration import recall_cutoff, reliability
from decirank.errors import InvalidInputError
from decirank.stores.calibrations import CalibrationStore
from decirank.stores.runlog import current_runlog
from tests.calibration_rows import SUPPORT_QUESTION as QUESTION
from tests.calibration_rows import TEAMS as _TEAMS
from tests.calibration_rows import support_rows as _support_rows
from tests.calibration_rows import team_rows as _team_rows


@pytest.fixture(scope="module")
def support():
    return _support_rows(300, 0)


def test_calibrate_stores_a_map_that_score_then_applies(support):
    result = decirank.calibrate(support[:100], QUESTION, name="problems", tool="score", model="local")
    stored = CalibrationStore().get("problems")
    assert stored is not None and stored.to_dict() == result.calibration.to_dict()
    summary = result.to_dict()
    assert summary["model"] == "local:default" and summary["tool"] == "score" and summary["rows"] == 100
    assert summary["positives"] == sum(row["answer"] for row in support[:100])
    assert summary["method"] in ("identity", "platt", "isotonic")
    assert sum(entry["rows"] for entry in summary["before"]["table"]) == 100
    assert sum(entry["rows"] for entry in summary["after"]["table"]) == 100

    texts = [row["item"] for row in support[100:]]
    plain = decirank.score(texts, QUESTION, model="local")
    mapped = decirank.score(texts, QUESTION, model="local", calibration="problems")
    assert mapped.raw_probabilities == plain.probabilities
    assert mapped.probabilities == pytest.approx(stored.map(plain.probabilities).tolist())
    assert mapped.to_dict()["calibration"] == "problems"
    # The run log says which map a call used.
    run = current_runlog().run(mapped.run_id)
    assert run["inputs"]["calibration"]["name"] == "problems"
    assert run["inputs"]["calibration"]["data_hash"] == stored.data_hash


def test_calibrate_is_a_run_whose_model_calls_are_its_children(support):
    result = decirank.calibrate(support[:40], QUESTION, name="small", tool="filter", model="lexical")
    run = current_runlog().run(result.run_id)
    assert run["tool"] == "calibrate" and run["status"] == "success"
    assert [child["tool"] for child in run["children"]] == ["filter"]


def test_target_recall_holds_on_held_out_messages_over_seeded_splits(support):
    """The promise, checked as a user would: fit on 100 labelled rows, filter the other 200, 40 seeded splits."""
    texts = [row["item"] for row in support]
    labels = np.array([row["answer"] for row in support], dtype=int)
    answered = decirank.filter(texts, QUESTION, model="local", min_confidence=0.0)
    raw = np.array([decision.raw_probability for decision in answered.decisions])
    held = 0
    for split in range(40):
        order = np.random.default_rng(split).permutation(len(texts))
        fit, rest = order[:100], order[100:]
        cut = recall_cutoff(raw[fit], labels[fit], 0.9, 0.9, batch_size=len(rest))
        kept = raw[rest] >= cut.threshold if cut.threshold is not None else np.ones(len(rest), bool)
        held += (kept & (labels[rest] == 1)).sum() / (labels[rest] == 1).sum() >= 0.9
    assert held / 40 >= 0.85  # 0.9 promised; 40 splits measure it to about +-0.05

    # And once end to end, through calibrate and filter themselves.
    decirank.calibrate(support[:100], QUESTION, name="gate", model="local")
    result = decirank.filter(texts[100:], QUESTION, model="local", calibration="gate", target_recall=0.9)
    promise = result.to_dict()["promise"]
    assert promise["target_recall"] == 0.9 and promise["confidence"] == 0.9
    assert promise["threshold"] == recall_cutoff(raw[:100], labels[:100], 0.9, 0.9, batch_size=200).threshold
    kept = np.array([d.kept for d in result.decisions])
    assert kept[labels[100:] == 1].mean() >= 0.9
    assert not kept.all()  # a real cut, not "keep everything"
    assert all(d.kept == (d.raw_probability >= promise["threshold"]) for d in result.decisions)


def test_classify_coverage_holds_on_held_out_messages():
    rows = _team_rows(260, 1)
    options = {team: f"messages for the {team} team" for team in _TEAMS}
    question = "Which team should handle this message?"
    result = decirank.calibrate(rows[:100], question, name="teams", tool="classify", options=options, model="local")
    assert result.calibration.map.method in ("identity", "temperature")
    texts = [row["item"] for row in rows[100:]]
    sets = decirank.classify(texts, question, options, model="local", calibration="teams", coverage=0.9)
    covered = [row["answer"] in d.prediction_set for row, d in zip(rows[100:], sets.decisions, strict=True)]
    assert np.mean(covered) >= 0.9
    assert sets.mean_set_size < len(options)
    assert sets.to_dict()["coverage"]["coverage"] == 0.9
    assert all(abs(sum(d.probabilities.values()) - 1) < 1e-6 for d in sets.decisions)


def test_a_calibration_for_another_question_tool_or_model_is_refused(support):
    decirank.calibrate(support[:40], QUESTION, name="lex", tool="filter", model="lexical")
    texts = [row["item"] for row in support[40:45]]
    with pytest.raises(InvalidInputError, match="fitted for") as caught:
        decirank.filter(texts, "Is this about money?", model="lexical", calibration="lex")
    assert caught.value.field == "calibration"
    with pytest.raises(InvalidInputError, match="fitted for filter") as caught:
        decirank.score(texts, QUESTION, model="lexical", calibration="lex")
    assert caught.value.field == "calibration"
    with pytest.raises(InvalidInputError, match="lexical:bm25") as caught:
        decirank.filter(texts, QUESTION, model="local", calibration="lex")
    assert caught.value.field == "calibration"
    with pytest.raises(InvalidInputError, match="no calibration 'nope'") as caught:
        decirank.filter(texts, QUESTION, model="lexical", calibration="nope")
    assert caught.value.field == "calibration"


def test_targets_and_coverage_need_a_calibration_and_sane_levels(support):
    texts = [row["item"] for row in support[:5]]
    with pytest.raises(InvalidInputError) as caught:
        decirank.filter(texts, QUESTION, model="lexical", target_recall=0.9)
    assert caught.value.field == "calibration"
    decirank.calibrate(support[:40], QUESTION, name="lex", model="lexical")
    for arguments, field in (
        ({"target_recall": 1.0}, "target_recall"),
        ({"target_recall": 0.9, "target_precision": 0.9}, "target_recall"),
        ({"target_recall": 0.9, "confidence": 1.5}, "confidence"),
        ({"target_recall": 0.9, "min_confidence": 0.3}, "min_confidence"),
    ):
        with pytest.raises(InvalidInputError) as caught:
            decirank.filter(texts, QUESTION, model="lexical", calibration="lex", **arguments)
        assert caught.value.field == field
    with pytest.raises(InvalidInputError) as caught:
        decirank.classify(texts, "Which team?", ["a", "b"], model="lexical", coverage=0.9)
    assert caught.value.field == "calibration"


def test_too_few_or_one_sided_rows_are_refused_before_any_model_call(support):
    with pytest.raises(InvalidInputError, match="at least 20") as caught:
        decirank.calibrate(support[:10], QUESTION, name="x", model="lexical")
    assert caught.value.field == "rows"
    one_sided = [row for row in support if row["answer"]][:30]
    with pytest.raises(InvalidInputError, match="of each answer") as caught:
        decirank.calibrate(one_sided, QUESTION, name="x", model="lexical")
    assert caught.value.field == "rows"
    with pytest.raises(InvalidInputError) as caught:
        decirank.calibrate([{"item": "a", "answer": "maybe"}] * 30, QUESTION, name="x", model="lexical")
    assert caught.value.field == "rows.0.answer"
    assert current_runlog().runs() == []
    assert CalibrationStore().names() == []


def test_a_rerank_calibration_over_many_queries_serves_any_query(support):
    rows = [
        {"query": "a broken or late order", "item": row["item"], "answer": row["answer"]} for row in support[:30]
    ] + [{"query": "a happy customer", "item": row["item"], "answer": not row["answer"]} for row in support[30:60]]
    result = decirank.calibrate(rows, None, name="relevance", tool="rerank", model="local")
    assert result.calibration.question is None
    reranked = decirank.rerank(
        "damaged goods", [row["item"] for row in support[60:70]], model="local", calibration="relevance"
    )
    assert reranked.calibration == "relevance"
    scores = [document.relevance_score for document in reranked.results]
    assert scores == sorted(scores, reverse=True)


def test_calibrated_probabilities_are_better_calibrated_on_held_out_rows_for_the_lexical_model(support):
    """The lexical model's numbers are far from frequencies; 100 labels bring them close."""
    decirank.calibrate(support[:100], QUESTION, name="lex100", tool="score", model="lexical")
    result = decirank.score([row["item"] for row in support[100:]], QUESTION, model="lexical", calibration="lex100")
    labels = [int(row["answer"]) for row in support[100:]]
    before = reliability(result.raw_probabilities, labels).ece
    after = reliability(result.probabilities, labels).ece
    assert after < before
    assert after < 0.1
