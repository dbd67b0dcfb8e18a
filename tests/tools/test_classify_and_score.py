"""classify and score: one question per text, the text as its state, on the embedded model."""

from __future__ import annotations

import asyncio

import pytest

import decirank
from decirank.errors import InvalidInputError
from decirank.stores.runlog import current_runlog

INTENTS = ["card_arrival", "exchange_rate", "lost_or_stolen_card"]


def test_classify_picks_a_label_per_text_and_gives_another_domain_the_most_none():
    """In-scope texts get their label; a text from another domain gets by far the most "none of these"."""
    texts = ["My new card still has not come in the post", "What rate do you use for euros?",
             "Which team won the football match last night?"]  # fmt: skip
    result = decirank.classify(texts, "What does the customer want?", INTENTS, none="none of these")
    assert [d.choice for d in result.decisions][:2] == ["card_arrival", "exchange_rate"]
    nones = [d.probabilities["none of these"] for d in result.decisions]
    assert nones[2] > 3 * max(nones[:2])
    for decision in result.decisions:
        assert sum(decision.probabilities.values()) == pytest.approx(1.0)
    assert current_runlog().run(result.run_id)["tool"] == "classify"


def test_classify_learns_from_examples():
    options = {"a": "category one", "b": "category two"}
    examples = [{"state": t, "answer": "a"} for t in ("I love my dog", "cats are great pets", "my parrot talks")] + [
        {"state": t, "answer": "b"} for t in ("the stock market fell", "interest rates rose", "shares dropped today")
    ]
    result = decirank.classify(["my hamster escaped"], "Which category?", options, examples=examples)
    assert result.decisions[0].choice == "a"
    with pytest.raises(InvalidInputError, match=r"examples\.0\.answer"):
        decirank.classify(["x"], "Which?", options, examples=[{"state": "x", "answer": "c"}])


def test_score_gives_one_probability_per_text_and_has_an_async_twin():
    texts = ["a moving, funny and beautifully acted film", "a dull, lifeless mess that wastes its cast"]
    good, bad = decirank.score(texts, "Is this movie review positive?").probabilities
    assert good > 0.5 > bad
    again = asyncio.run(decirank.ascore(texts, "Is this movie review positive?")).probabilities
    assert again == pytest.approx([good, bad])
