"""Template resolution: splicing, text, paths, lengths, and errors that say what was there."""

from __future__ import annotations

import pytest

from decirank.plans import TemplateError, resolve_templates

CONTEXT = {
    "input": {"state": {"question": "flea life"}, "items": ["a", "b", "c"], "name": "Ada", "n": 3},
    "E1": {
        "items": ["flea facts", "bread"],
        "ranked": [
            {"item": "flea facts", "index": 1, "probability": 0.75},
            {"item": "bread", "index": 0, "probability": 0.25},
        ],
        "none": None,
    },
}


def resolve(value, context=CONTEXT):
    return resolve_templates(value, context, "steps.E2.input", "E2")


def test_a_string_that_is_one_tag_splices_the_raw_json_value():
    """``"{{E1.items}}"`` becomes the list itself, ``"{{input.n}}"`` the number, ``{{E1.none}}`` null."""
    assert resolve("{{E1.items}}") == ["flea facts", "bread"]
    assert resolve("{{input.state}}") == {"question": "flea life"}
    assert resolve("{{input.n}}") == 3
    assert resolve("{{E1.none}}") is None
    assert resolve("{{ input.name }}") == "Ada"  # spaces inside the braces are allowed
    assert resolve("{{E1}}") is CONTEXT["E1"]  # a root alone is the whole output


def test_tags_in_longer_text_are_stringified():
    """Strings go in as they are; anything else as compact JSON."""
    assert resolve("Hello {{input.name}}!") == "Hello Ada!"
    assert resolve("{{input.name}} has {{input.n}}") == "Ada has 3"
    assert resolve("state: {{input.state}}") == 'state: {"question":"flea life"}'
    assert resolve("items={{E1.items}}") == 'items=["flea facts","bread"]'
    assert resolve("none is {{E1.none}}") == "none is null"


def test_list_indices_and_length():
    """Dot paths take list indices (negative from the end) and ``length`` of lists, text and objects."""
    assert resolve("{{E1.ranked.0.item}}") == "flea facts"
    assert resolve("{{E1.ranked.-1.probability}}") == 0.25
    assert resolve("{{E1.items.length}}") == 2
    assert resolve("{{input.name.length}}") == 3
    assert resolve("{{input.state.length}}") == 1
    assert resolve("{{input.items.length}} items") == "3 items"


def test_a_key_named_length_wins_over_the_length():
    """An object's own ``length`` key is what ``.length`` names on it."""
    assert resolve("{{input.box.length}}", {"input": {"box": {"length": 42, "width": 1}}}) == 42


def test_templates_resolve_inside_nested_mappings_and_lists():
    """Values at any depth are resolved; keys are taken literally."""
    value = {
        "state": {"question": "{{input.state.question}}", "{{not}}": "{{E1.ranked.0.index}}"},
        "items": ["{{E1.items.0}}", "x", 7, None, ["{{input.name}}"]],
    }
    assert resolve(value) == {
        "state": {"question": "flea life", "{{not}}": 1},
        "items": ["flea facts", "x", 7, None, ["Ada"]],
    }


def test_text_without_tags_and_non_strings_are_left_alone():
    """Text without a tag, numbers and booleans come back unchanged."""
    assert resolve("no tags {here}") == "no tags {here}"
    assert resolve(0.5) == 0.5
    assert resolve(True) is True


def test_a_bad_key_lists_the_keys_that_exist_there():
    """The error names the field, the step, the tag, and the keys at the point the path failed."""
    with pytest.raises(TemplateError) as caught:
        resolve({"items": "{{E1.itemz}}"})
    error = caught.value
    assert error.step == "E2"
    assert error.field == "steps.E2.input.items"
    assert str(error) == "steps.E2.input.items: {{E1.itemz}}: E1 has no 'itemz' (its keys: items, ranked, none)"


def test_a_bad_path_deeper_down_says_how_far_it_got():
    """A path that fails deep down names the part it reached and what was there."""
    with pytest.raises(TemplateError, match=r"E1.ranked.0 has no 'score' \(its keys: item, index, probability\)"):
        resolve("{{E1.ranked.0.score}}")
    with pytest.raises(TemplateError, match=r"E1.items has no '5' \(it is a list of 2: indices 0 to 1, or length\)"):
        resolve("{{E1.items.5}}")
    with pytest.raises(TemplateError, match=r"input.n has no 'x' \(it is int, with no keys\)"):
        resolve("text {{input.n.x}}")


def test_a_missing_step_lists_what_can_be_used():
    """A tag naming an unknown root names the field it is in and the roots that exist."""
    with pytest.raises(TemplateError) as caught:
        resolve({"state": {"q": "{{E7.items}}"}})
    assert caught.value.field == "steps.E2.input.state.q"
    assert "{{E7.items}} names neither the input nor an earlier step (available: input, E1)" in str(caught.value)


def test_a_malformed_tag_is_an_error():
    """An empty tag or one with an empty path part is a TemplateError."""
    with pytest.raises(TemplateError, match="is not a dot path"):
        resolve("{{E1..items}}")
    with pytest.raises(TemplateError, match="is not a dot path"):
        resolve("{{}}")
