"""filter with labelled examples: what every item's question carries, what the run log keeps, and what it changes."""

from __future__ import annotations

import pytest

import decirank
from decirank.errors import InvalidInputError
from decirank.stores.examples import ExampleStore
from decirank.stores.runlog import current_runlog
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.questions import Example

ITEMS = [
    "my cat sleeps all day",
    "the engine needs new spark plugs",
    "our puppy chews shoes",
    "tyres wear out fast on this car",
    "a hamster in a wheel",
    "the truck will not start",
]
PETS = [True, False, True, False, True, False]
EXAMPLES = [{"item": text, "answer": True} for text in (
    "I love my dog", "cats are great pets", "my parrot talks", "the goldfish tank is clean",
    "walking the dog in the park", "the kitten plays with yarn", "feeding the rabbit carrots",
    "our vet checked the puppy",
)] + [{"item": text, "answer": False} for text in (
    "the car needs an oil change", "my bike has a flat tyre", "the train was late", "a new motorbike engine",
    "the bus broke down again", "changing the brake pads", "the van failed its inspection",
    "a scooter with a dead battery",
)]  # fmt: skip


def test_examples_teach_the_local_model_a_question_it_cannot_read():
    """'Does it match?' says nothing a bi-encoder can use: alone it keeps nothing; with examples it keeps the pets."""
    zero_shot = decirank.filter(ITEMS, "Does it match?", None)
    assert [d.kept for d in zero_shot.decisions] != PETS
    few_shot = decirank.filter(ITEMS, "Does it match?", None, examples=EXAMPLES)
    assert [d.kept for d in few_shot.decisions] == PETS
    assert few_shot.items == ["my cat sleeps all day", "our puppy chews shoes", "a hamster in a wheel"]


def test_a_stored_set_teaches_the_same_as_the_list():
    """A set name is looked up in the example store; its states are item texts, so it decides as the list does."""
    ExampleStore().put("pets", [{"state": e["item"], "answer": e["answer"]} for e in EXAMPLES])
    by_name = decirank.filter(ITEMS, "Does it match?", None, examples="pets")
    by_list = decirank.filter(ITEMS, "Does it match?", None, examples=EXAMPLES)
    assert [d.probability for d in by_name.decisions] == pytest.approx([d.probability for d in by_list.decisions])


def test_every_items_question_carries_the_examples_rendered_like_items():
    """An example's item is shown as items are (describe's dot path); a state, an Example and a set pass as given."""
    backend = ScriptedBackend()
    items = [{"title": "cats", "id": 1}, {"title": "cars", "id": 2}]
    examples = [
        {"item": {"title": "dogs", "id": 9}, "answer": True},
        {"state": "bikes", "answer": False},
        Example("fish", True),
    ]
    with use_backend(backend) as model:
        result = decirank.filter(
            items, "Is it a pet?", {"site": "vet"}, describe="title", examples=examples, model=model
        )
    expected = (Example("dogs", True), Example("bikes", False), Example("fish", True))
    (request,) = backend.requests
    assert [q.examples for q in request.questions.values()] == [expected, expected]
    instructions = [q.instructions for q in request.questions.values()]
    assert instructions == ["Is it a pet?\nItem: cats", "Is it a pet?\nItem: cars"]
    inputs = current_runlog().run(result.run_id)["inputs"]
    assert inputs["examples"] == [e.to_dict() for e in expected]
    assert "example_set" not in inputs


def test_without_describe_an_example_item_is_canonical_json_and_a_set_name_is_recorded():
    """Without describe an object item is shown as canonical JSON, as items are; a set's name goes in the run log."""
    ExampleStore().put("tiny", [{"state": "fish", "answer": True}, {"state": "car", "answer": False}])
    backend = ScriptedBackend()
    with use_backend(backend) as model:
        decirank.filter([{"b": 1, "a": "x"}], "Q?", None, examples=[{"item": {"b": 2, "a": "y"}, "answer": False}],
                        model=model)  # fmt: skip
        named = decirank.filter(["cat"], "Q?", None, examples="tiny", model=model)
    first, second = (next(iter(r.questions.values())) for r in backend.requests)
    assert first.examples == (Example('{"a":"y","b":2}', False),)
    assert second.examples == (Example("fish", True), Example("car", False))
    inputs = current_runlog().run(named.run_id)["inputs"]
    assert inputs["example_set"] == "tiny" and len(inputs["examples"]) == 2


@pytest.mark.parametrize(
    ("examples", "field"),
    [
        ({"item": {"title": "x"}, "answer": True}, "examples"),
        ([{"item": {"title": "x"}}], "examples.0"),
        ([{"item": {"title": "x"}, "state": "y", "answer": True}], "examples.0"),
        ([{"item": {"title": "x"}, "answer": True}, {"item": {"title": "y"}, "answer": "yes"}], "examples.1.answer"),
        ([{"item": {"name": "x"}, "answer": True}], "examples.0.item"),
        ([{"state": "\udc80", "answer": True}], "examples.0.state"),
        ("no-such-set", "examples"),
    ],
)
def test_bad_examples_are_named_before_any_work(examples, field):
    """A bad example (or an unknown set) is an InvalidInputError naming its place; no model is asked."""
    backend = ScriptedBackend()
    with use_backend(backend) as model, pytest.raises(InvalidInputError) as caught:
        decirank.filter([{"title": "a"}], "Q?", None, describe="title", examples=examples, model=model)
    assert caught.value.field == field
    assert backend.requests == []


def test_the_lexical_model_ignores_examples():
    """lexical has nothing to learn with: the same answers with or without examples."""
    plain = decirank.filter(ITEMS, "Is it about a cat?", None, model="lexical")
    taught = decirank.filter(ITEMS, "Is it about a cat?", None, model="lexical", examples=EXAMPLES)
    assert [d.probability for d in taught.decisions] == [d.probability for d in plain.decisions]
