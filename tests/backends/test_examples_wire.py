"""Labelled examples on the hosted wires: one deterministic block appended to instructions, and read back."""

from __future__ import annotations

import pytest

import decirank
from decirank.backends import openai as decisions_wire
from decirank.backends import systemone as systemone_wire
from decirank.backends.openai import OpenAIDecisionsBackend
from decirank.backends.systemone import SystemOneBackend
from decirank.errors import InvalidInputError
from decirank.types.questions import ChoiceQuestion, DecisionRequest, Example, LikelihoodQuestion, ScoreQuestion
from tests.backends.test_openai import decisions_peer
from tests.loopback import Reply, ScriptedServer, answers, decide_once, uniform

PET = LikelihoodQuestion(
    "Is it a pet?\nItem: a hamster",
    true="it is a pet",
    false="it is not",
    examples=[Example("my dog", True), Example({"b": 1, "a": "two\nlines"}, False)],
)
PET_BLOCK = '\n\nLabelled examples:\n- "my dog" -> true\n- {"a":"two\\nlines","b":1} -> false'
TOPIC = ChoiceQuestion(
    "Which topic fits?",
    {"pets": "animals", "cars": "vehicles"},
    examples=[Example("my parrot talks", "pets"), Example("ünïcode brakes", "cars")],
)
TOPIC_BLOCK = '\n\nLabelled examples:\n- "my parrot talks" -> "pets"\n- "ünïcode brakes" -> "cars"'
LEVELS = ScoreQuestion("How urgent?", ("low", "high"))
REQUEST = DecisionRequest("a note", {"pet": PET, "topic": TOPIC, "urgency": LEVELS})


@pytest.fixture(scope="module")
def scripted():
    with ScriptedServer() as server:
        yield server


def test_systemone_sends_examples_as_one_block_after_the_instructions(scripted):
    """The body's noul and choice instructions end in the examples block: compact JSON states, JSON answers."""
    url = scripted.script("s1", Reply(body=answers(uniform)))
    decide_once(SystemOneBackend("jev-latest", base_url=url), REQUEST)
    (seen,) = scripted.requests_to("s1")
    questions = seen.body["questions"]
    assert questions["pet"] == {
        "type": "noul",
        "instructions": "Is it a pet?\nItem: a hamster" + PET_BLOCK,
        "criteria": {"true": "it is a pet", "false": "it is not"},
    }
    assert questions["topic"] == {
        "type": "choice",
        "instructions": "Which topic fits?" + TOPIC_BLOCK,
        "criteria": {"pets": "animals", "cars": "vehicles"},
    }
    assert questions["urgency"]["instructions"] == "How urgent?"
    assert all("examples" not in question for question in questions.values()), "no field a host might refuse"


def test_openai_sends_examples_as_one_block_after_the_outcomes(scripted, monkeypatch):
    """A predicate's block follows its outcome texts; a choice's follows its instructions."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    url = scripted.script("o1", Reply(body=decisions_peer))
    decide_once(OpenAIDecisionsBackend("m", base_url=url), REQUEST)
    (seen,) = scripted.requests_to("o1")
    pet, topic, urgency = seen.body["questions"]
    assert pet["instructions"] == "Is it a pet?\nItem: a hamster\nTrue: it is a pet\nFalse: it is not" + PET_BLOCK
    assert topic["instructions"] == "Which topic fits?" + TOPIC_BLOCK
    assert urgency["instructions"] == "How urgent?"


def test_the_block_is_read_back_into_examples_by_both_codecs():
    """Decoding what was encoded gives the question back, examples included (the servers decode so)."""
    for question in (PET, TOPIC):
        assert systemone_wire.decode_question(systemone_wire.encode_question(question), "q") == question
    assert decisions_wire.decode_question(decisions_wire.encode_question(TOPIC, "t"), "q") == TOPIC
    predicate = decisions_wire.decode_question(decisions_wire.encode_question(PET, "p"), "q")
    assert predicate.examples == PET.examples
    assert predicate.instructions == "Is it a pet?\nItem: a hamster\nTrue: it is a pet\nFalse: it is not"


@pytest.mark.parametrize(
    "tail",
    [
        '\n\nLabelled examples:\n- "a" -> true\n- not json -> false',  # a line that does not parse
        '\n\nLabelled examples:\n- "a" => true',  # no arrow
        '\n\nLabelled examples:\n- "a" -> 3',  # an answer that is neither a bool nor a key
        '\n\nLabelled examples:\n- "a" -> "elsewhere"',  # a key the choice does not have
        "\n\nLabelled examples:\n",  # an empty block
    ],
)
def test_text_that_is_not_a_whole_block_stays_instructions(tail):
    """Only a well-formed block whose answers fit the question is lifted; anything else is left as written."""
    wire = {"type": "choice", "instructions": "Pick." + tail, "criteria": {"a": "A", "b": "B"}}
    question = systemone_wire.decode_question(wire, "q")
    assert question.instructions == "Pick." + tail and question.examples == ()


def test_a_wire_examples_list_is_taken_as_given_and_checked_by_field():
    """A System One question's own examples list is its examples; a bad answer names its place."""
    wire = {"type": "noul", "instructions": "Pet?", "examples": [{"state": "dog", "answer": True}]}
    assert systemone_wire.decode_question(wire, "questions.q").examples == (Example("dog", True),)
    wire["examples"] = [{"state": "dog", "answer": "yes"}]
    with pytest.raises(InvalidInputError) as caught:
        systemone_wire.decode_question(wire, "questions.q")
    assert caught.value.field == "questions.q.examples.0.answer"


def test_the_filter_sends_its_examples_to_a_hosted_model(scripted):
    """Through the tool: every item's noul question carries the same block of item texts."""
    url = scripted.script("f1", Reply(body=answers(uniform)))
    examples = [{"item": {"title": "dog"}, "answer": True}, {"item": {"title": "car"}, "answer": False}]
    decirank.filter([{"title": "cat"}, {"title": "bus"}], "Pet?", None, describe="title", examples=examples,
                    model="systemone:m", base_url=url)  # fmt: skip
    (seen,) = scripted.requests_to("f1")
    block = '\n\nLabelled examples:\n- "dog" -> true\n- "car" -> false'
    assert [q["instructions"] for q in seen.body["questions"].values()] == [
        "Pet?\nItem: cat" + block,
        "Pet?\nItem: bus" + block,
    ]
