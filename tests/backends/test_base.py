"""What the in-process backends share: a state read as words, a likelihood read as a score."""

from __future__ import annotations

import pytest

from decirank.backends.base import binomial_levels, render_state
from decirank.types.answers import ScoreAnswer


def test_render_state_reads_values_not_keys():
    """Keys label values, so only the values become words; None and booleans add none."""
    assert render_state({"question": "fleas", "context": ["dogs", 3, None, True]}) == "fleas\ndogs\n3"
    assert render_state(None) == ""


@pytest.mark.parametrize("levels", [2, 3, 5, 10])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.83, 1.0])
def test_a_likelihood_read_as_a_score_keeps_its_value_as_the_expected_level(levels, p):
    """The binomial over the levels is a distribution whose normalized expected level is the likelihood."""
    answer = ScoreAnswer(binomial_levels(levels, p))
    assert len(answer.probabilities) == levels
    assert sum(answer.probabilities) == pytest.approx(1.0)
    assert answer.normalized_score == pytest.approx(p)
