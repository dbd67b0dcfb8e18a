"""The lexical backend answers all three question types from BM25, with no model."""

from __future__ import annotations

import asyncio

import pytest

import decirank
from decirank.backends import create_backend
from decirank.errors import DecisionTimeoutError
from decirank.types.answers import check_response
from decirank.types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion


def decide(request):
    backend = create_backend("lexical")
    response = asyncio.run(backend.decide(request))
    check_response(request, response)
    return response


def test_likelihoods_favour_matching_texts_and_stay_in_bounds():
    """A text that shares the state's words is more likely than one that does not, and both are probabilities."""
    request = DecisionRequest(
        state={"query": "flea life cycle"},
        questions={
            "match": LikelihoodQuestion("This note bears on the request: the flea life cycle lasts weeks"),
            "miss": LikelihoodQuestion("This note bears on the request: bread recipes for beginners"),
        },
    )
    answers = decide(request).answers
    assert 0.0 <= answers["miss"].probability < answers["match"].probability <= 1.0


def test_state_keys_are_not_matched_as_words():
    """A state {"question": ...} must not make every option that says 'question' win."""
    request = DecisionRequest(
        state={"question": "fleas"},
        questions={"pick": ChoiceQuestion("Which?", {"a": "a question about taxes", "b": "fleas on dogs"})},
    )
    assert decide(request).answers["pick"].choice == "b"


def test_choice_is_a_distribution_and_score_has_every_level():
    """A choice is a distribution led by the matching option; a score covers every level; the call costs nothing."""
    request = DecisionRequest(
        state="python code that parses json",
        questions={
            "pick": ChoiceQuestion("Which language?", {"py": "python", "rs": "rust", "go": "go"}),
            "grade": ScoreQuestion("parses json", ("not at all", "somewhat", "fully")),
        },
    )
    response = decide(request)
    pick, grade = response.answers["pick"], response.answers["grade"]
    assert sum(pick.probabilities.values()) == pytest.approx(1.0)
    assert pick.choice == "py"
    assert len(grade.probabilities) == 3 and sum(grade.probabilities) == pytest.approx(1.0)
    assert 0.0 <= grade.normalized_score <= 1.0
    assert response.usage.input_tokens > 0 and response.usage.cost == 0.0


def test_declares_limits():
    """The backend declares the option and level limits the tools split their work by."""
    limits = create_backend("lexical").limits
    assert limits.max_options == 255 and limits.max_levels == 10


def test_lexical_honours_the_time_budget_like_every_model():
    """5000 documents under a 1 ms budget time out with lexical too, rather than answer after the budget."""
    with pytest.raises(DecisionTimeoutError):
        decirank.rerank("fleas", ["flea treatment for dogs"] * 5000, model="lexical", timeout=0.001)
