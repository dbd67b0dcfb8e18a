"""The embedded model answers each question shape with its own map: real weights, no fakes."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib

import numpy as np
import pytest

import decirank
from decirank.backends import create_backend
from decirank.backends.local._assets import SHA256, find_decision_head
from decirank.backends.local._fewshot import heads
from decirank.backends.local._head import (
    CONTRAST_COLUMN,
    FEATURES,
    SCALAR_FEATURES,
    SCALARS,
    DecisionHead,
    swap_sides,
    yes_no_features,
)
from decirank.backends.local._runtime import shared_runtime
from decirank.backends.local._shapes import VARIANTS, Evidence, Vectors, plan_question
from decirank.backends.local.runtime import dense_vectors
from decirank.errors import InvalidInputError
from decirank.types.answers import check_response
from decirank.types.questions import ChoiceQuestion, DecisionRequest, Example, LikelihoodQuestion, ScoreQuestion

PETS = [
    "My dog keeps scratching; the vet found fleas.",
    "Stock prices fell sharply after the rate rise.",
    "Our cat sleeps all day on the sofa.",
    "How to bake sourdough bread at home.",
]
INTENTS = {
    "card_arrival": "card arrival",
    "exchange_rate": "exchange rate",
    "lost_or_stolen_card": "lost or stolen card",
    "top_up_failed": "top up failed",
    "cash_withdrawal_charge": "cash withdrawal charge",
}


def decide(state, **questions):
    request = DecisionRequest(state=state, questions=questions)
    response = asyncio.run(create_backend("local").decide(request))
    check_response(request, response)
    return response.answers


def test_the_readme_filter_keeps_the_pet_items():
    result = decirank.filter(PETS, "Is this about pets?", state={})
    assert result.items == [PETS[0], PETS[2]]


def test_rank_shares_a_property_question_among_the_items_that_have_it():
    """ "Which one is about pets?" fits the dog and the cat item alike: neither takes it all."""
    ranked = decirank.rank(PETS, "Which one is about pets?", state={}).ranked
    by_index = {entry.index: entry.probability for entry in ranked}
    assert {ranked[0].index, ranked[1].index} == {0, 2}
    assert by_index[2] > 0.5 * by_index[0]
    assert by_index[1] + by_index[3] < 0.1


def test_a_topic_question_about_the_state():
    question = LikelihoodQuestion("Is the customer asking about card arrival?")
    assert decide("My new card still hasn't come in the post.", q=question)["q"].probability > 0.5
    assert decide("What rate do you use to convert euros to pounds?", q=question)["q"].probability < 0.5


def test_true_and_false_descriptions_are_read_as_a_contrast():
    def ask(state, true, false):
        question = LikelihoodQuestion("Does the reviewer recommend the film?", true=true, false=false)
        return decide(state, q=question)["q"].probability

    good, bad = "a good film", "a bad film"
    assert ask("a moving, funny and beautifully acted film", good, bad) > 0.5
    assert ask("a dull, lifeless mess that wastes its cast", good, bad) < 0.5
    # Swapping the descriptions turns the answer round.
    assert ask("a moving, funny and beautifully acted film", bad, good) < 0.5
    assert ask("a dull, lifeless mess that wastes its cast", bad, good) > 0.5


def test_a_negated_topic_question_gets_about_one_minus_the_plain_answer():
    """ "Is this not about pets?" is no longer answered as "Is this about pets?". It is a topic question, so
    the reader's own reading of the negated form (near chance on topics) barely counts."""
    for text in PETS:
        answers = decide(
            text, plain=LikelihoodQuestion("Is this about pets?"), negated=LikelihoodQuestion("Is this not about pets?")
        )
        assert answers["negated"].probability == pytest.approx(1 - answers["plain"].probability, abs=0.05)
    assert decirank.filter(PETS, "Is this not about pets?", state={}).items == [PETS[1], PETS[3]]


def _answer_and_tokens(text: str, question: str) -> tuple[float, int]:
    request = DecisionRequest(state=text, questions={"q": LikelihoodQuestion(question)})
    response = asyncio.run(create_backend("local").decide(request))
    return response.answers["q"].probability, response.usage.input_tokens


@pytest.mark.parametrize(
    ("question", "plain"),
    [("Is this not about pets?", "Is this about pets?"), ("Is it not working?", "Is it working?")],
)
def test_a_negated_question_read_once_costs_one_read(monkeypatch, question, plain):
    """Where the blend reads a negated question once (``stack.py --negated-reads one``), a topic question is
    exactly its plain form's answer turned round, and either costs what its plain form costs (one read), where
    both forms cost more."""
    shipped = shared_runtime.blend
    monkeypatch.setattr(shared_runtime, "_blend", dataclasses.replace(shipped, negated_reads="one"))
    text = "My laptop will not turn on at all, even when it is plugged in; the dog chewed the cable."
    once, once_tokens = _answer_and_tokens(text, question)
    plain_answer, plain_tokens = _answer_and_tokens(text, plain)
    assert once_tokens == pytest.approx(plain_tokens, abs=2)  # "not" is a token or two of the question
    if "pets" in question:
        assert once == pytest.approx(1 - plain_answer, abs=1e-9)
    monkeypatch.setattr(shared_runtime, "_blend", dataclasses.replace(shipped, negated_reads="both"))
    _, both_tokens = _answer_and_tokens(text, question)
    assert both_tokens > once_tokens + 10


def test_the_decision_head_ships_with_its_recorded_hash():
    assert hashlib.sha256(find_decision_head().read_bytes()).hexdigest() == SHA256["decision_head.npz"]


def test_the_saved_heads_hold_one_weight_per_named_scalar():
    for head in DecisionHead.load_all(find_decision_head()).values():
        for name in ("mean", "scale", "w"):
            assert head.weights[name].shape == (len(SCALAR_FEATURES),)


def test_each_named_scalar_is_in_its_column():
    """The columns the head and ``swap_sides`` index are those ``SCALAR_FEATURES`` names."""
    rng = np.random.default_rng(0)

    def unit(rows):
        vectors = rng.normal(size=(rows, 384))
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    texts, (topic, question, true, false), background = unit(3), unit(4), unit(20)
    features = yes_no_features(texts, topic, question, [(true, false)], background, 2, np.array([5, 6, 7]))
    assert features.shape == (3, FEATURES) and SCALARS == len(SCALAR_FEATURES)
    column = dict(zip(SCALAR_FEATURES, features[:, :SCALARS].T))
    assert np.allclose(column["topic_similarity"], texts @ topic)
    assert np.allclose(column["question_similarity"], texts @ question)
    assert np.allclose(column["contrast"], texts @ (true - false))
    assert np.allclose(features[:, CONTRAST_COLUMN], texts @ (true - false))
    assert np.allclose(column["has_contrast"], 1.0) and np.allclose(column["topic_words"], np.log1p(2))
    assert np.allclose(column["text_tokens"], np.log1p([5, 6, 7]))
    assert np.allclose(swap_sides(features)[:, CONTRAST_COLUMN], -features[:, CONTRAST_COLUMN])


@pytest.mark.parametrize(
    ("text", "question", "expected"),
    [
        ("The app crashes every time I open the settings page", "Is this about billing?", False),
        ("I'd like to return these shoes, they're too small", "Is this about billing?", False),
        ("Stock prices fell sharply after the rate rise.", "Is this about finance?", True),
        ("How to bake sourdough bread at home.", "Is this about cooking?", True),
    ],
)
def test_plain_topic_questions_come_out_as_a_person_would_answer(text, question, expected):
    assert (decide(text, q=LikelihoodQuestion(question))["q"].probability >= 0.5) is expected


def test_a_label_is_compared_by_its_name_and_its_description_together():
    """MiniLM's cosine to a described option is to its description's vector and half its name's."""
    text = "The app crashes at login"
    question = ChoiceQuestion("Which team?", {"billing": "payments, refunds, invoices", "tech": "the app, logins"})
    plan = plan_question(text, question, VARIANTS["default"])
    texts = list(plan.dense_texts())
    assert {"billing", "tech", "payments, refunds, invoices", "the app, logins"} <= set(texts)
    vectors = Vectors(texts)
    vectors.dense = dense_vectors(texts)
    evidence = Evidence(VARIANTS["default"], shared_runtime, vectors)
    name, description = vectors.of(["tech", "the app, logins"])
    name_and_description = 0.5 * name + description
    expected = name_and_description @ vectors.of([text])[0] / np.linalg.norm(name_and_description)
    assert plan.similarity(evidence)[1] == pytest.approx(expected, abs=1e-6)
    assert plan.similarity(evidence)[1] != pytest.approx(vectors.cosines(text, ["the app, logins"])[0], abs=1e-3)


def test_none_of_these_comes_from_evidence_that_no_option_fits():
    options = {**INTENTS, "none": "none of these"}
    question = ChoiceQuestion("What does the customer want?", options)
    off_topic = decide("Which team won the football match last night?", q=question)["q"]
    on_topic = decide("I think someone stole my card, please block it", q=question)["q"]
    assert off_topic.choice == "none"
    assert on_topic.choice == "lost_or_stolen_card"
    assert on_topic.probabilities["none"] < 0.5


def test_rank_none_against_passages_is_the_best_passages_no():
    passages = [
        "Shares in technology companies fell sharply after the central bank raised interest rates, "
        "with analysts warning of further volatility in the weeks ahead as markets digest the decision.",
        "The recipe calls for flour, water, salt and a sourdough starter, left to rise overnight in a warm "
        "kitchen before it is shaped, proofed again and baked in a very hot oven until golden.",
    ]
    result = decirank.rank(passages, "Which passage answers?", {"question": "how long do fleas live"}, none="none")
    assert result.no_fit and result.none > 0.5


def test_few_shot_examples_teach_a_choice_head():
    options = {"a": "category one", "b": "category two"}  # labels that say nothing: only examples can teach them
    examples = [Example(text, "a") for text in ("I love my dog", "cats are great pets", "my parrot talks")] + [
        Example(text, "b") for text in ("the stock market fell", "interest rates rose", "shares dropped today")
    ]
    question = ChoiceQuestion("Which category?", options, examples=examples)
    assert decide("my hamster escaped from its cage", q=question)["q"].choice == "a"
    assert decide("bond yields climbed again", q=question)["q"].choice == "b"
    fitted = len(heads._heads)
    decide("my rabbit eats carrots", q=question)
    assert len(heads._heads) == fitted  # the head is fitted once per question and reused


def test_few_shot_examples_teach_a_yes_no_head():
    examples = [Example(t, True) for t in ("I love my dog", "cats are great pets", "my parrot talks")] + [
        Example(t, False) for t in ("the stock market fell", "interest rates rose", "shares dropped today")
    ]
    question = LikelihoodQuestion("Does it match?", examples=examples)
    assert decide("my hamster escaped from its cage", q=question)["q"].probability > 0.5
    assert decide("bond yields climbed again", q=question)["q"].probability < 0.5


def test_yes_no_examples_need_both_answers():
    question = LikelihoodQuestion("Is it about pets?", examples=[Example("I love my dog", True)])
    with pytest.raises(InvalidInputError, match="both answers"):
        decide("my cat", q=question)


def test_a_question_with_nothing_to_judge_is_refused():
    with pytest.raises(InvalidInputError, match="state"):
        decide(None, q=LikelihoodQuestion("Is this about pets?"))


def test_a_score_question_about_the_state_follows_its_likelihood():
    levels = ("not at all", "somewhat", "fully")
    answers = decide(
        "My new card still hasn't come in the post.",
        on=ScoreQuestion("Is the customer asking about card arrival?", levels),
        off=ScoreQuestion("Is the customer asking about the exchange rate?", levels),
    )
    # Degrees of a yes ("not at all" … "fully") say nothing of the text on their own: the question decides.
    assert answers["on"].normalized_score > 0.7
    assert answers["off"].normalized_score < 0.3


def test_a_polar_question_is_answered_as_the_contrast_with_its_opposite():
    question = LikelihoodQuestion("Is this movie review positive?")
    assert decide("a moving, funny and beautifully acted film", q=question)["q"].probability > 0.5
    assert decide("a dull, lifeless mess that wastes its cast", q=question)["q"].probability < 0.5


def test_the_filters_item_questions_share_one_few_shot_head():
    """Each item is its own question ("...\\nItem: <text>"); the head depends only on the examples."""
    examples = [{"item": t, "answer": True} for t in ("I love my dog", "cats are great pets", "my parrot talks")] + [
        {"item": t, "answer": False} for t in ("the stock market fell", "interest rates rose", "shares dropped")
    ]
    before = len(heads._heads)
    decirank.filter([f"my hamster number {i} escaped" for i in range(12)], "Is it about pets?", {}, examples=examples)
    assert len(heads._heads) == before + 1


@pytest.mark.parametrize("model", ["local", "local:minilm", "local:splade"])
@pytest.mark.parametrize(
    "question",
    [
        "Is it about pets?",
        "Does this passage bear on the request?\nText: pets and other animals",
        "This passage bears on the request: pets and other animals",
    ],
)
def test_few_shot_answers_on_every_variant_and_shape(model, question):
    # A few-shot head starts from each example's zero-shot logit and learns from its MiniLM vector: a passage
    # question needs the examples' SPLADE states, and SPLADE alone still needs their MiniLM vectors.
    examples = [{"item": "I adopted a puppy last week.", "answer": True}, {"item": "Bond yields rose.", "answer": False}]
    result = decirank.filter(PETS, question, model=model, examples=examples)
    probabilities = [decision.probability for decision in result.decisions]
    assert len(probabilities) == len(PETS)
    assert all(0.0 < p < 1.0 for p in probabilities)
    assert probabilities[0] > probabilities[1]  # the dog with fleas above stock prices
