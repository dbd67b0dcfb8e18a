"""The example store: named sets of labelled examples, one JSON Lines file each, and resolving a name."""

from __future__ import annotations

import json

import pytest

from decirank.errors import InvalidInputError, StoreError
from decirank.stores.examples import ExampleStore, default_root, resolve_examples

PETS = [
    {"state": "I love my dog", "answer": True},
    {"state": {"text": "the car needs an oil change"}, "answer": False},
    {"state": "a parrot", "answer": "pets"},
]


def test_a_set_round_trips_under_the_user_home(isolated_user_dir):
    """put then get gives the examples back in order, in one JSON Lines file under DECIRANK_HOME."""
    store = ExampleStore()
    assert store.root == default_root() == isolated_user_dir / "examples"
    assert store.put("pets", PETS) == 3
    assert store.get("pets") == PETS
    lines = (store.root / "pets.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == PETS
    assert [path.name for path in store.root.iterdir()] == ["pets.jsonl"], "no temporary file is left behind"


def test_put_replaces_list_names_and_remove(tmp_path):
    """A second put replaces the set; list tells names and sizes by name; remove says whether there was one."""
    store = ExampleStore(tmp_path / "sets")
    assert store.names() == [] and store.list() == [] and store.get("pets") is None
    store.put("pets", PETS)
    store.put("pets", PETS[:1])
    store.put("a-first.v2", PETS)
    assert store.get("pets") == PETS[:1]
    assert [(info.name, info.count) for info in store.list()] == [("a-first.v2", 3), ("pets", 1)]
    assert store.list()[0].to_dict()["name"] == "a-first.v2"
    assert store.remove("pets") is True
    assert store.remove("pets") is False
    assert store.names() == ["a-first.v2"]


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "with space", "x" * 101, "é", 7])
def test_names_that_could_leave_the_folder_or_are_not_names_are_refused(tmp_path, name):
    """A set name is a letter or digit then letters, digits, '_', '.' or '-': the error names the field."""
    store = ExampleStore(tmp_path)
    with pytest.raises(InvalidInputError) as caught:
        store.put(name, PETS)
    assert caught.value.field == "name"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("examples", "field"),
    [
        ("not a list", "examples"),
        ([], "examples"),
        ([{"state": "x"}], "examples.0"),
        ([PETS[0], {"state": "x", "answer": True, "extra": 1}], "examples.1"),
        ([{"state": "x", "answer": 1}], "examples.0.answer"),
        ([{"state": "x", "answer": ""}], "examples.0.answer"),
        ([{"state": {"t": float("nan")}, "answer": True}], "examples.0.state.t"),
        ([{"state": "\ud800", "answer": True}], "examples.0.state"),
    ],
)
def test_bad_examples_are_refused_by_place(tmp_path, examples, field):
    """Each bad example is an InvalidInputError naming where it is, and nothing is written."""
    store = ExampleStore(tmp_path)
    with pytest.raises(InvalidInputError) as caught:
        store.put("set", examples)
    assert caught.value.field == field
    assert store.names() == []


def test_a_damaged_file_is_a_store_error(tmp_path):
    """A set file edited by hand into something that is not examples is a StoreError naming the line."""
    store = ExampleStore(tmp_path)
    (tmp_path / "broken.jsonl").write_text('{"state": "a", "answer": true}\n{"state": \n', encoding="utf-8")
    with pytest.raises(StoreError, match="line 2"):
        store.get("broken")


def test_resolve_examples_passes_lists_and_looks_up_names(isolated_user_dir):
    """A list (or None) passes through; a name is its stored set; an unknown name lists the known ones."""
    assert resolve_examples(PETS) is PETS
    assert resolve_examples(None) is None
    ExampleStore().put("pets", PETS)
    ExampleStore().put("cars", PETS[:1])
    assert resolve_examples("pets") == PETS
    with pytest.raises(InvalidInputError) as caught:
        resolve_examples("dogs", "questions.q1.examples")
    assert caught.value.field == "questions.q1.examples"
    assert "no example set 'dogs'; known sets: cars, pets" in str(caught.value)
    with pytest.raises(InvalidInputError, match="examples"):
        resolve_examples("not a name!")


def test_a_set_can_be_stored_from_the_filter_tools_item_examples(tmp_path):
    """put() takes {"item", "answer"} (as filter does), storing each item as the text filter shows it."""
    store = ExampleStore(tmp_path)
    examples = [{"item": "My cat sleeps all day", "answer": True}, {"item": {"title": "Rates"}, "answer": False}]
    assert store.put("pets", examples) == 2
    assert store.get("pets") == [
        {"state": "My cat sleeps all day", "answer": True},
        {"state": '{"title":"Rates"}', "answer": False},
    ]


def test_an_example_with_other_keys_names_them():
    """An example object with neither "state" nor "item" is refused, the message listing the keys it has."""
    with pytest.raises(InvalidInputError, match=r"examples\.0: expected an object with \"state\" \(or \"item\"\) and "
                       r"\"answer\" \(it has the keys 'text', 'answer'\)"):  # fmt: skip
        ExampleStore().put("x", [{"text": "a", "answer": True}])


def test_a_set_can_be_stored_from_example_objects(tmp_path):
    """put() takes decirank.Example objects, as questions do."""
    from decirank import Example

    store = ExampleStore(tmp_path)
    assert store.put("intents", [Example("Where is my card?", "card_arrival")]) == 1
    assert store.get("intents") == [{"state": "Where is my card?", "answer": "card_arrival"}]
