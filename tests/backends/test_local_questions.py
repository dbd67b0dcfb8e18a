"""How the embedded model reads an English question: where its subject starts, what it asks about, whether it
is negated, which head answers it, and how the reader is asked it. Plain functions of strings: no model loads."""

from __future__ import annotations

import numpy as np
import pytest

from decirank.backends.local._questions import (
    CONTRAST,
    QUALITY,
    STATEMENT,
    TOPIC,
    is_none_option,
    level_asked,
    named_only,
    negated_reading,
    option_asked,
    option_texts,
    polar_contrast,
    question_kind,
    question_topic,
    read_yes_no,
    refers_to_state,
    split_frame,
    split_question,
    strip_negation,
    yes_no_asked,
)


@pytest.mark.parametrize(
    ("text", "frame", "subject"),
    [
        ("This note bears on the request: fleas live long", "This note bears on the request", "fleas live long"),
        (
            "How well does the artifact meet this criterion: cites sources",
            "How well does the artifact meet this criterion",
            "cites sources",
        ),
        ("Is the meeting at 10:30 tomorrow?", "", "Is the meeting at 10:30 tomorrow?"),
        ("no frame here", "", "no frame here"),
        (
            "One two three four five six seven eight nine ten eleven twelve thirteen: x",
            "",
            "One two three four five six seven eight nine ten eleven twelve thirteen: x",
        ),
    ],
)
def test_split_frame(text, frame, subject):
    """A short leading clause ending in ': ' is split off as the frame; long clauses and times are not frames."""
    assert split_frame(text) == (frame, subject)


@pytest.mark.parametrize(
    ("text", "instructions", "subject"),
    [
        ("Is it about fleas?\nItem: a: b\nc", "Is it about fleas?", "a: b\nc"),
        (
            "This note bears on the request: Fleas\nAuthor: Ann\nItem: x",
            "This note bears on the request",
            "Fleas\nAuthor: Ann\nItem: x",
        ),
        ("Which one?\nAuthor: Ann", "", "Which one?\nAuthor: Ann"),
        ("plain text", "", "plain text"),
    ],
)
def test_split_question(text, instructions, subject):
    """A leading frame wins; else a trailing block labelled as the subject (Item:, Document:, ...)."""
    assert split_question(text) == (instructions, subject)


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("Is the customer asking about card arrival?", "card arrival"),
        ("Is this about pets?", "pets"),
        ("Is this news article about sports?", "sports"),
        ("Does the customer want a refund?", "want a refund"),
        ("Is this a complaint?", "a complaint"),
        ("Is this movie review positive?", "positive"),
        ("Is it spam?", "spam"),
        ("spam", "spam"),
    ],
)
def test_question_topic(question, topic):
    assert question_topic(question) == topic


def test_questions_that_point_at_the_state():
    assert refers_to_state("Does this answer the question?")
    assert not refers_to_state("Is this about pets?")


@pytest.mark.parametrize(
    ("key", "description", "expected"),
    [("none", "", True), ("x", "None of these", True), ("x", "Other", True), ("x", "none of the above fits.", True),
     ("x", "nonetheless", False), ("x", "card arrival", False),
     ("x", "Other things like decorative scoring will also increase the cost.", False)],
)  # fmt: skip
def test_none_options(key, description, expected):
    assert is_none_option(key, description) is expected


@pytest.mark.parametrize(
    ("negated", "plain"),
    [
        ("Is this not about pets?", "Is this about pets?"),
        ("Isn't this about pets?", "Is this about pets?"),
        ("Does the customer not want a refund?", "Does the customer want a refund?"),
        ("Is the sentiment of this text not positive?", "Is the sentiment of this text positive?"),
        ("Can't it be used offline?", "Can it be used offline?"),
        ("Is it false that the shop is open?", "The shop is open?"),
        ("Is it true that the writer isn't asking for a refund?", "Is the writer asking for a refund?"),
        ("Is it true the customer does not want more offers?", "Does the customer want more offers?"),
        ("Is it true, that they can't log in?", "Can they log in?"),
    ],
)
def test_a_negated_question_is_read_as_its_plain_form(negated, plain):
    assert strip_negation(negated) == (plain, True)
    assert strip_negation(plain) == (plain, False)


@pytest.mark.parametrize(
    "question",
    [
        "Is it true that the man is asleep?",
        # The "not" is in a clause of the claim, not the claim's own verb.
        "Is it true that kangaroo means I don't know?",
        "Is it true that the plan that did not pass was revived?",
    ],
)
def test_a_claim_whose_own_verb_is_not_negated_is_not_read_as_negated(question):
    assert strip_negation(question) == (question, False)


def test_a_negated_question_swaps_its_descriptions():
    """The caller's true and false describe the question as asked, so a negated question's sides swap back."""
    reading = read_yes_no("Is this review not positive?", true="a negative review", false="a positive review")
    assert reading.negated and reading.contrasts[0] == ("a positive review", "a negative review")


def test_a_polar_question_is_read_as_the_contrast_with_its_opposite():
    assert polar_contrast("Is this movie review positive?") == (
        "Is this movie review positive?",
        "Is this movie review negative?",
    )
    assert polar_contrast("Is it good or bad?") is None  # two polar words: no single contrast


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Is this about pets?", TOPIC),
        ("Does this post discuss ice hockey?", TOPIC),
        ("Does the user want to book a flight?", TOPIC),
        ("Is the customer asking for a refund?", TOPIC),
        ("Does the user want to say that it does not matter?", TOPIC),
        ("Is the user asking the assistant to say what music they like?", TOPIC),
        ("Is this tweet ironic?", QUALITY),
        ("Is this sentence subjective?", QUALITY),
        ("Is this a complaint?", QUALITY),
        ("Is this review positive?", CONTRAST),
        ("Does this imply that the man is asleep?", STATEMENT),
    ],
)
def test_each_question_goes_to_the_head_of_its_kind(question, kind):
    assert question_kind(read_yes_no(question)) == kind


def test_negated_reading_averages_both_readings_unless_the_question_is_a_topic():
    """Of a question that is not a topic the two readings count alike (``negated_reading``)."""
    assert negated_reading(4.0, -2.0, topic=0.0) == pytest.approx(3.0)
    assert negated_reading(4.0, -2.0, topic=1.0) == pytest.approx(4.0)


def test_a_negated_question_read_once_is_read_as_asked_unless_it_is_a_topic():
    """Read once, "Is the laptop not working?" counts as asked (turned round), "Is this not about pets?" in its
    plain form; the form not read may be NaN."""
    assert negated_reading(np.nan, -2.0, topic=0.2, reads="one") == pytest.approx(2.0)
    assert negated_reading(4.0, np.nan, topic=0.9, reads="one") == pytest.approx(4.0)
    assert list(negated_reading(np.array([4.0, 4.0]), np.array([-2.0, -2.0]), np.array([0.2, 0.9]), "one")) == [2, 4]


def test_options_and_levels_are_asked_as_yes_no_questions_of_their_own():
    assert option_asked("Which team?", "tech_support", "the app, logins") == "Which team? tech support: the app, logins"
    assert option_asked("Which team?", "billing", "billing") == "Which team? billing"
    assert option_asked("Which one answers?", "003", "SPLADE for first-stage ranking") == (
        "Which one answers? SPLADE for first-stage ranking"
    )
    assert level_asked("How urgent is this?", "high") == "How urgent is this? high"
    assert yes_no_asked("Is it good?", "good", None) == "Is it good? (yes: good; no: -)"


def test_an_option_is_named_only_when_its_description_adds_nothing():
    assert named_only("billing", "")
    assert named_only("billing", "Billing ")
    assert named_only("tech_support", "tech support")
    assert not named_only("billing", "payments, refunds, invoices")


def test_an_option_is_compared_as_its_name_and_its_description():
    assert option_texts("billing", "payments, refunds") == ("billing", "payments, refunds")
    # named only: the name as words, once
    assert option_texts("tech_support", "tech_support") == ("tech support",)
    assert option_texts("billing", "") == ("billing",)
    # a position (rank's keys) says nothing of the option
    assert option_texts("003", "SPLADE for first-stage ranking") == ("SPLADE for first-stage ranking",)
