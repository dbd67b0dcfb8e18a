"""Typed questions reject what no model could answer; check_response rejects what no tool may use."""

from __future__ import annotations

import math

import pytest

from decirank.errors import InvalidAnswerError, InvalidInputError, LimitExceededError
from decirank.types.answers import (
    ChoiceAnswer,
    DecisionResponse,
    LikelihoodAnswer,
    ScoreAnswer,
    Usage,
    check_response,
)
from decirank.types.limits import ModelLimits
from decirank.types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion


def test_questions_check_their_shape():
    """Questions refuse option and level counts no model could answer, blank text and empty requests."""
    with pytest.raises(InvalidInputError, match="2 to 255 options"):
        ChoiceQuestion("Which?", {"a": "only one"})
    with pytest.raises(InvalidInputError, match="2 to 255 options"):
        ChoiceQuestion("Which?", {str(n): "x" for n in range(256)})
    with pytest.raises(InvalidInputError, match="2 to 10 levels"):
        ScoreQuestion("How good?", tuple("abcdefghijk"))
    with pytest.raises(InvalidInputError, match="instructions"):
        LikelihoodQuestion(" ")
    with pytest.raises(InvalidInputError, match="at least one question"):
        DecisionRequest(state={}, questions={})


def test_choice_and_score_readouts():
    """A choice answer reads out its top key and confidence; a score answer its expected and scaled level."""
    answer = ChoiceAnswer({"a": 0.2, "b": 0.7, "c": 0.1})
    assert answer.choice == "b"
    assert answer.confidence == pytest.approx((3 * 0.7 - 1) / 2)
    score = ScoreAnswer((0.0, 0.5, 0.5))
    assert score.score == pytest.approx(1.5) and score.normalized_score == pytest.approx(0.75)


def test_usage_adds_up_and_keeps_unknown_cost_unknown():
    """Usage sums tokens and calls, and a cost stays None only while no call knew its cost."""
    total = Usage(input_tokens=3, calls=1) + Usage(input_tokens=4, calls=1)
    assert total.input_tokens == 7 and total.calls == 2 and total.cost is None
    assert (Usage(cost=0.5) + Usage()).cost == 0.5


REQUEST = DecisionRequest(
    state="s",
    questions={
        "yes": LikelihoodQuestion("Is it?"),
        "pick": ChoiceQuestion("Which?", {"a": "A", "b": "B"}),
        "grade": ScoreQuestion("How?", ("low", "high")),
    },
)
GOOD = {
    "yes": LikelihoodAnswer(0.3),
    "pick": ChoiceAnswer({"a": 0.5, "b": 0.49}),  # rounded by a service: close enough to 1
    "grade": ScoreAnswer((0.25, 0.75)),
}


def test_check_response_accepts_well_formed_answers():
    """Answers of the right kind, in range and summing to about 1 pass the check."""
    check_response(REQUEST, DecisionResponse("m:x", GOOD))


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        ({"yes": None}, "missing"),
        ({"yes": LikelihoodAnswer(math.nan)}, "finite"),
        ({"yes": LikelihoodAnswer(-0.1)}, "outside"),
        ({"yes": ChoiceAnswer({"a": 1.0})}, "choice answer to a likelihood"),
        ({"pick": ChoiceAnswer({"a": 0.5, "c": 0.5})}, "exactly the options"),
        ({"pick": ChoiceAnswer({"a": 0.5, "b": 0.2})}, "sum to"),
        ({"grade": ScoreAnswer((1.0,))}, "levels"),
    ],
)
def test_check_response_rejects_what_would_invent_a_score(replacement, message):
    """A missing, non-finite, out-of-range, mismatched or non-summing answer is an InvalidAnswerError."""
    answers = {**GOOD, **replacement}
    answers = {key: value for key, value in answers.items() if value is not None}
    with pytest.raises(InvalidAnswerError, match=message):
        check_response(REQUEST, DecisionResponse("m:x", answers))


def test_limits_combine_to_the_tightest_and_refuse_oversized_requests():
    """Combined limits are the tightest of each, and a request over them raises LimitExceededError."""
    combined = ModelLimits.combine([ModelLimits(max_options=255, max_questions=None), ModelLimits(max_options=208, max_questions=30)])
    assert combined.max_options == 208 and combined.max_questions == 30
    three_options = DecisionRequest(state="s", questions={"q": ChoiceQuestion("Which?", {"a": "A", "b": "B", "c": "C"})})
    with pytest.raises(LimitExceededError, match="3 options"):
        ModelLimits(max_options=2).check(three_options, model="m:x")
    with pytest.raises(LimitExceededError, match="3 questions"):
        ModelLimits(max_questions=2).check(REQUEST, model="m:x")
