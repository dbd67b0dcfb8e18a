"""decirank eval labels: the questions built from labelled rows, the metrics, and real runs."""

from __future__ import annotations

import json
import time

import pytest

from decirank.errors import DecisionError, InvalidInputError, ServerError, UnknownModelError
from decirank.evaluation.labels import (
    NONE_KEY,
    build_task,
    choice_metrics,
    evaluate_labels,
    evaluate_task,
    label_words,
    likelihood_metrics,
    load_labelled,
    load_options,
)
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.answers import ChoiceAnswer, LikelihoodAnswer
from decirank.types.questions import ChoiceQuestion, LikelihoodQuestion

# Four intents of a bank's customers, ten utterances each, and two-sided movie reviews.
INTENTS = {
    "card_arrival": [
        "when will my new card arrive", "my card has not arrived yet", "how long until the card arrives",
        "is my card in the mail", "still waiting for my card to arrive", "card arrival is taking weeks",
        "has my card been sent", "the card I ordered never arrived", "track the arrival of my card",
        "when does a new card usually arrive",
    ],
    "lost_or_stolen_card": [
        "my card was stolen", "I lost my card yesterday", "someone stole my wallet and card",
        "I cannot find my card anywhere", "report a lost card", "my card is lost what do I do",
        "block my stolen card", "card stolen on the train", "I think I lost my card at the bar",
        "freeze my lost card please",
    ],
    "exchange_rate": [
        "what exchange rate do you use", "is the exchange rate good", "how is the exchange rate calculated",
        "exchange rate for euros to dollars", "why is your exchange rate different",
        "where can I see the exchange rate",
        "do you add a margin to the exchange rate", "current exchange rate for pounds", "exchange rate on weekends",
        "which exchange rate applies to my transfer",
    ],
    "top_up_limits": [
        "what is the top up limit", "how much can I top up", "is there a maximum top up",
        "top up limits per day", "can I top up more than the limit", "why is my top up limited",
        "minimum and maximum top up amounts", "raise my top up limit", "limits on topping up my account",
        "how often can I top up",
    ],
}
REVIEWS = {
    "positive": [
        "a wonderful and moving film", "brilliant acting and a great story", "I loved every minute of it",
        "a delightful and funny movie", "beautiful and touching", "a great film with superb performances",
        "charming , witty and warm", "one of the best movies this year", "an excellent and joyful ride",
        "smart , funny and wonderful",
    ],
    "negative": [
        "a dull and boring film", "terrible acting and a bad story", "I hated every minute of it",
        "a tedious and lifeless movie", "ugly and pointless", "a bad film with awful performances",
        "clumsy , stupid and cold", "one of the worst movies this year", "a miserable and tiresome slog",
        "dumb , boring and awful",
    ],
}


def rows_of(groups):
    return [{"text": text, "label": label} for label, texts in groups.items() for text in texts]


INTENT_ROWS = rows_of(INTENTS)
REVIEW_ROWS = rows_of(REVIEWS)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


# --- reading ---------------------------------------------------------------------------------------


def test_load_labelled_reads_rows_and_names_a_bad_line(tmp_path):
    """Rows keep their line numbers; a bad line, a missing label or file is an InvalidInputError naming it."""
    path = write_jsonl(tmp_path / "data.jsonl", INTENT_ROWS[:3])
    rows = load_labelled(path)
    assert [(row.text, row.label, row.line) for row in rows][0] == ("when will my new card arrive", "card_arrival", 1)
    path.write_text('{"text": "a", "label": "x"}\n\n{"text": "b", "label": \n')
    with pytest.raises(InvalidInputError, match="line 3"):
        load_labelled(path)
    path.write_text('{"text": "a"}\n')
    with pytest.raises(InvalidInputError, match="line 1"):
        load_labelled(path)
    path.write_text("\n")
    with pytest.raises(InvalidInputError, match="at least one"):
        load_labelled(path)
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_labelled(tmp_path / "missing.jsonl")
    with pytest.raises(InvalidInputError, match="not a regular file"):
        load_labelled(tmp_path)


def test_options_file_is_a_list_or_an_object(tmp_path):
    """A list of labels gets descriptions in words; an object keeps its own; anything else is refused."""
    path = tmp_path / "options.json"
    path.write_text('["card_arrival", "exchange_rate"]')
    assert load_options(path) == {"card_arrival": "card arrival", "exchange_rate": "exchange rate"}
    path.write_text('{"card_arrival": "the card has not come yet"}')
    assert load_options(path) == {"card_arrival": "the card has not come yet"}
    for bad in ('"card_arrival"', "[1.5]", "{]"):
        path.write_text(bad)
        with pytest.raises(InvalidInputError):
            load_options(path)
    assert label_words("lost_or_stolen_card") == "lost or stolen card"


# --- building the questions --------------------------------------------------------------------------


def test_choice_asks_one_question_per_row_over_the_labels_in_words():
    """Each row is its own request, state = its text; options are every label, keyed by name, described in words."""
    task = build_task(INTENT_ROWS)
    assert len(task.cases) == 40 and task.out_of_scope == 0
    case = task.cases[0]
    assert case.request.state == "when will my new card arrive" and case.truth == "card_arrival"
    (question,) = case.request.questions.values()
    assert isinstance(question, ChoiceQuestion) and question.instructions == "Which label fits the text best?"
    assert dict(question.options) == {label: label_words(label) for label in sorted(INTENTS)}


def test_hold_out_is_seeded_and_its_rows_belong_on_none():
    """--hold-out drops seeded labels from the options; their rows (and only theirs) are out of scope, truth none."""
    task = build_task(INTENT_ROWS, none="none of these", hold_out=1, seed=3)
    assert task.held_out == build_task(INTENT_ROWS, none="none of these", hold_out=1, seed=3).held_out
    (held,) = task.held_out
    options = dict(task.cases[0].request.questions["answer"].options)
    assert held not in options and options[NONE_KEY] == "none of these" and len(options) == 4
    assert task.out_of_scope == 10
    assert all((case.truth == NONE_KEY) == (case.row.label == held) for case in task.cases)
    seeds = {tuple(build_task(INTENT_ROWS, none="n", hold_out=2, seed=seed).held_out) for seed in range(8)}
    assert len(seeds) > 1


def test_out_of_scope_rows_need_a_none_option_and_options_must_be_known():
    """Labels missing from the options need --none; a yes/no option that is no label of the data is refused."""
    with pytest.raises(InvalidInputError, match="none"):
        build_task(INTENT_ROWS, options=["card_arrival", "exchange_rate"])
    described = {"card_arrival": "card not here yet", "exchange_rate": "rates"}
    task = build_task(INTENT_ROWS, options=described, none="other")
    assert task.out_of_scope == 20 and task.options == {**described, "none": "other"}
    with pytest.raises(InvalidInputError, match="unknown label 'pin_blocked'"):
        build_task(INTENT_ROWS, type="noul", options=["card_arrival", "pin_blocked"])
    # A choice may offer options no row has: rows of another domain are all out of scope.
    task = build_task(INTENT_ROWS, options=["card_arrival", "pin_blocked"], none="other")
    assert "pin_blocked" in task.options
    with pytest.raises(InvalidInputError, match="hold_out"):
        build_task(INTENT_ROWS, none="other", hold_out=4)
    with pytest.raises(InvalidInputError, match="none"):
        build_task([*INTENT_ROWS, {"text": "hello", "label": "none"}], none="other")
    with pytest.raises(InvalidInputError, match="true"):
        build_task(INTENT_ROWS, true="yes")


def test_examples_are_seeded_rows_per_label_and_are_not_scored():
    """--examples N takes N rows of each option label as examples on every question; the rest are scored."""
    task = build_task(INTENT_ROWS, examples=2, seed=1, none="none of these", hold_out=1)
    question = task.cases[0].request.questions["answer"]
    shown = question.examples
    assert len(shown) == 6 and task.examples_per_question == 6  # three option labels; the held-out one shows none
    assert {example.answer for example in shown} == set(question.options) - {NONE_KEY}
    assert all(INTENTS[example.answer].count(example.state) == 1 for example in shown)
    scored = {case.request.state for case in task.cases}
    assert len(task.cases) == 34 and not scored & {example.state for example in shown}
    assert all(case.request.questions["answer"] is question for case in task.cases)
    with pytest.raises(InvalidInputError, match="at most 10 examples per label"):
        build_task(INTENT_ROWS, examples=11)


def test_limit_scores_a_seeded_sample():
    """--limit N scores N rows, the same ones for the same seed."""
    first = [case.row.line for case in build_task(INTENT_ROWS, limit=7, seed=5).cases]
    assert len(first) == 7 and first == [case.row.line for case in build_task(INTENT_ROWS, limit=7, seed=5).cases]
    assert first == sorted(first)
    assert len(build_task(INTENT_ROWS, limit=1000).cases) == 40


def test_topical_noul_asks_half_the_rows_about_their_own_label():
    """A question with {label}: half the rows about their own label (true), half about another (false), seeded."""
    task = build_task(INTENT_ROWS, type="noul", question="Is the customer asking about {label}?", true="yes, {label}")
    assert task.topical and len(task.cases) == 40
    assert sum(case.truth for case in task.cases) == 20
    for case in task.cases:
        question = case.request.questions["answer"]
        assert isinstance(question, LikelihoodQuestion)
        asked = question.instructions.removeprefix("Is the customer asking about ").removesuffix("?")
        assert (asked == label_words(case.row.label)) == case.truth
        assert question.true == f"yes, {asked}"
    again = build_task(INTENT_ROWS, type="noul", question="Is the customer asking about {label}?", true="yes, {label}")
    assert [c.request for c in again.cases] == [c.request for c in task.cases]


def test_topical_examples_are_true_and_false_pairs_for_the_label_asked():
    """Each label's question carries N of its own rows (true) and N of other labels' rows (false), in pairs."""
    task = build_task(INTENT_ROWS, type="noul", question="About {label}?", examples=2)
    assert len(task.cases) == 32 and task.examples_per_question == 4
    for case in task.cases:
        question = case.request.questions["answer"]
        answers = [example.answer for example in question.examples]
        assert answers == [True, False, True, False]
        asked = question.instructions.removeprefix("About ").removesuffix("?")
        for example in question.examples:
            label = next(label for label, texts in INTENTS.items() if example.state in texts)
            assert (label_words(label) == asked) == example.answer


def test_binary_noul_is_true_for_the_positive_label_with_descriptions():
    """A question without {label}: truth is label == the second label in sorted order, or --positive."""
    described = ("Is this review positive?", "a positive review", "a negative review")
    task = build_task(REVIEW_ROWS, type="noul", question=described[0], true=described[1], false=described[2])
    assert task.positive == "positive" and not task.topical
    question = task.cases[0].request.questions["answer"]
    assert (question.instructions, question.true, question.false) == described
    assert all(case.truth == (case.row.label == "positive") for case in task.cases)
    flipped = build_task(REVIEW_ROWS, type="noul", question="Is this review negative?", positive="negative")
    assert all(case.truth == (case.row.label == "negative") for case in flipped.cases)
    with_examples = build_task(REVIEW_ROWS, type="noul", question="Positive?", examples=3)
    shown = with_examples.cases[0].request.questions["answer"].examples
    assert [example.answer for example in shown] == [False, True] * 3 and len(with_examples.cases) == 14
    with pytest.raises(InvalidInputError, match="positive"):
        build_task(INTENT_ROWS, type="noul", question="Is it about cards?")
    with pytest.raises(InvalidInputError, match="positive"):
        build_task(REVIEW_ROWS, type="noul", question="Positive?", positive="neutral")
    with pytest.raises(InvalidInputError, match="none"):
        build_task(REVIEW_ROWS, type="noul", question="Positive?", none="neither")


# --- metrics, by hand -------------------------------------------------------------------------------

CHOICE_ROWS = [
    {"text": "t1", "label": "a"},
    {"text": "t2", "label": "b"},
    {"text": "t3", "label": "c"},
    {"text": "t4", "label": "c"},
]
CHOICE_ANSWERS = {
    "t1": {"a": 0.7, "b": 0.2, "none": 0.1},  # a: right, top 0.7
    "t2": {"a": 0.6, "b": 0.3, "none": 0.1},  # a: wrong, top 0.6
    "t3": {"a": 0.2, "b": 0.2, "none": 0.6},  # none: right (c is out of scope), top 0.6
    "t4": {"a": 0.5, "b": 0.1, "none": 0.4},  # a: wrong, top 0.5
}
#: Worked by hand. F1: a 0.5 (1 of 3 predicted), b 0, none 2/3 (1 of 2 found). Brier: (0.14+0.86+0.24+0.62)/4.
#: ECE: bins 0.7 (|0.7-1|, 1 row), 0.6 (|0.6-0.5|, 2 rows), 0.5 (|0.5-0|, 1 row).
#: AUROC: the none probabilities of the out-of-scope rows (0.6, 0.4) beat those of the others (0.1, 0.1).
CHOICE_EXPECTED = {
    "accuracy": 0.5, "macro_f1": (0.5 + 0 + 2 / 3) / 3, "brier": 0.465, "ece": (0.3 + 2 * 0.1 + 0.5) / 4,
    "auroc": 1.0, "oos_recall": 0.5, "in_scope_accuracy": 0.5,
}

REVIEW_PROBABILITIES = {
    "p1": (0.9, "pos"), "p2": (0.4, "pos"), "n1": (0.6, "neg"), "n2": (0.1, "neg"), "p3": (0.8, "pos"),
}
#: Truth TTFFT, predicted TFTFT: accuracy 3/5; F1 true 2/3, false 1/2; AUROC 5 of 6 pairs;
#: Brier (0.01+0.36+0.36+0.01+0.04)/5; ECE: five bins of one row each, mean gap (0.1+0.6+0.6+0.1+0.2)/5.
LIKELIHOOD_EXPECTED = {
    "accuracy": 0.6, "macro_f1": (2 / 3 + 1 / 2) / 2, "auroc": 5 / 6, "brier": 0.156, "ece": 0.32,
    "oos_recall": None, "in_scope_accuracy": None,
}


def test_choice_metrics_match_hand_computation():
    truths = ["a", "b", "none", "none"]
    metrics = choice_metrics(truths, [CHOICE_ANSWERS[f"t{n}"] for n in range(1, 5)])
    assert metrics == pytest.approx(CHOICE_EXPECTED)


def test_choice_metrics_without_out_of_scope_rows_score_the_top_probability():
    """No out-of-scope rows: AUROC is the top probability against being right; no OOS figures."""
    distributions = [{"a": 0.9, "b": 0.1}, {"a": 0.6, "b": 0.4}, {"a": 0.8, "b": 0.2}]
    metrics = choice_metrics(["a", "b", "a"], distributions, none=None)
    assert metrics["accuracy"] == pytest.approx(2 / 3) and metrics["auroc"] == pytest.approx(1.0)
    assert metrics["oos_recall"] is None and metrics["in_scope_accuracy"] is None
    all_right = choice_metrics(["a"], [{"a": 0.9, "b": 0.1}], none=None)
    assert all_right["auroc"] is None and all_right["brier"] == pytest.approx(0.02)


def test_likelihood_metrics_match_hand_computation():
    truths = [label == "pos" for _, label in REVIEW_PROBABILITIES.values()]
    metrics = likelihood_metrics(truths, [p for p, _ in REVIEW_PROBABILITIES.values()])
    assert metrics == pytest.approx(LIKELIHOOD_EXPECTED)


def test_a_scripted_choice_run_reports_the_hand_computed_figures(tmp_path):
    """End to end through the decider: --options {a, b}, --none; c's rows are out of scope."""
    backend = ScriptedBackend(answer=lambda request: {"answer": ChoiceAnswer(CHOICE_ANSWERS[request.state])})
    with use_backend(backend) as model:
        report = evaluate_labels(CHOICE_ROWS, [model], options=["a", "b"], none="none of these")
    data = report.to_dict()
    assert data["scored_rows"] == 4 and data["out_of_scope_rows"] == 2 and data["options"] == 3
    (score,) = data["models"]
    assert score["model"] == model and score["answered_by"] == model and score["rows"] == 4
    for key, value in CHOICE_EXPECTED.items():
        assert score[key] == pytest.approx(value, abs=1e-4), key
    assert score["seconds_per_row"] >= 0 and score["usage"]["calls"] == 4
    assert sorted(request.state for request in backend.requests) == ["t1", "t2", "t3", "t4"]


def test_a_scripted_noul_run_reports_the_hand_computed_figures():
    rows = [{"text": text, "label": label} for text, (_, label) in REVIEW_PROBABILITIES.items()]
    backend = ScriptedBackend(
        answer=lambda request: {"answer": LikelihoodAnswer(REVIEW_PROBABILITIES[request.state][0])}
    )
    with use_backend(backend) as model:
        report = evaluate_labels(rows, model, type="noul", question="Is it good?")
    (score,) = report.to_dict()["models"]
    assert report.task.positive == "pos"
    for key, value in LIKELIHOOD_EXPECTED.items():
        assert score[key] == pytest.approx(value, abs=1e-4), key


class CountingBackend(ScriptedBackend):
    """Remembers how many calls were in flight at once."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.in_flight = self.most_in_flight = 0

    async def decide(self, request):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await super().decide(request)
        finally:
            self.in_flight -= 1


def test_rows_are_asked_concurrently_but_bounded():
    backend = CountingBackend(delay=0.02)
    with use_backend(backend) as model:
        started = time.perf_counter()
        report = evaluate_labels(INTENT_ROWS, model, concurrency=4)
        elapsed = time.perf_counter() - started
    assert backend.most_in_flight == 4 and len(backend.requests) == 40
    assert elapsed < 40 * 0.02  # not one after another
    assert report.concurrency == 4


def test_a_failed_model_call_fails_the_evaluation_with_no_scores():
    """One failed call ends the run with a DecisionError naming the model and the row; nothing is scored."""
    backend = ScriptedBackend(error=ServerError("boom", status=500))
    with use_backend(backend) as model, pytest.raises(DecisionError, match=rf"{model} failed on line \d+: .*boom"):
        evaluate_labels(INTENT_ROWS, [model])


def test_an_unknown_model_fails_before_any_row_is_asked():
    backend = ScriptedBackend()
    with use_backend(backend) as model, pytest.raises(UnknownModelError):
        evaluate_labels(INTENT_ROWS, [model, "nosuchprovider:x"])
    assert backend.requests == []


# --- real runs -------------------------------------------------------------------------------------


def check_score(score, rows):
    assert score["rows"] == rows
    for key in ("accuracy", "macro_f1", "brier", "ece"):
        assert 0.0 <= score[key] <= (2.0 if key == "brier" else 1.0), key
    assert score["auroc"] is None or 0.0 <= score["auroc"] <= 1.0
    assert score["seconds_per_row"] > 0


def test_lexical_choice_runs_side_by_side_with_a_second_model():
    """Two models on the same rows: one report entry each, in the order given."""
    report = evaluate_labels(INTENT_ROWS, ["lexical", "lexical:bm25"])
    data = report.to_dict()
    assert [score["model"] for score in data["models"]] == ["lexical", "lexical:bm25"]
    for score in data["models"]:
        check_score(score, 40)
        assert score["oos_recall"] is None
    # The intents share their words with their names, so word overlap alone gets most rows right.
    assert data["models"][0]["accuracy"] > 0.5
    assert data["models"][0]["accuracy"] == data["models"][1]["accuracy"]


def test_lexical_choice_with_none_hold_out_and_examples():
    report = evaluate_labels(INTENT_ROWS, "lexical", none="none of these", hold_out=1, examples=2, limit=20, seed=2)
    data = report.to_dict()
    assert data["scored_rows"] == 20 and data["examples_per_question"] == 6 and len(data["held_out"]) == 1
    (score,) = data["models"]
    check_score(score, 20)
    if data["out_of_scope_rows"]:
        assert 0.0 <= score["oos_recall"] <= 1.0 and 0.0 <= score["in_scope_accuracy"] <= 1.0


def test_lexical_noul_topical_and_binary():
    topical = evaluate_labels(INTENT_ROWS, "lexical", type="noul", question="Is the customer asking about {label}?")
    check_score(topical.to_dict()["models"][0], 40)
    binary = evaluate_labels(
        REVIEW_ROWS, "lexical", type="noul", question="Is this movie review positive?",
        true="a positive movie review", false="a negative movie review", examples=2,
    )
    data = binary.to_dict()
    assert data["positive"] == "positive" and data["scored_rows"] == 16
    check_score(data["models"][0], 16)


def test_local_model_runs_choice_and_noul():
    """The embedded model answers every kind of evaluation (its quality is not judged here)."""
    choice = evaluate_labels(INTENT_ROWS, "local", none="none of these", hold_out=1, examples=1)
    data = choice.to_dict()
    (score,) = data["models"]
    check_score(score, 37)  # examples come from the three option labels only
    assert score["answered_by"] == "local:default" and data["out_of_scope_rows"] == 10
    assert 0.0 <= score["oos_recall"] <= 1.0
    task = build_task(INTENT_ROWS, type="noul", question="Is the customer asking about {label}?", examples=1, limit=20)
    check_score(evaluate_task(task, "local").to_dict()["models"][0], 20)
    binary = evaluate_labels(
        REVIEW_ROWS, "local", type="noul", question="Is this movie review positive?",
        true="a positive movie review", false="a negative movie review",
    )
    check_score(binary.to_dict()["models"][0], 20)
