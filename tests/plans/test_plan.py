"""Loading a plan: every malformation is refused by name before any step runs."""

from __future__ import annotations

import pytest

from decirank.plans import InvalidPlanError, Plan, PlanError, TemplateError, load_plan
from tests.plans.documented_step import RANK_STEP


def step(step_id="E1", tool_name="builtin__rank", **tool_input):
    tool_input = tool_input or {"items": [], "instructions": "Which?", "state": {}}
    return {"id": step_id, "tool_name": tool_name, "input": tool_input}


def test_the_documented_rank_step_loads_as_written():
    """builtin__rank's documented plan step loads as written, its templates kept unresolved."""
    plan = load_plan(RANK_STEP)
    assert plan.step_ids == ["E1"]
    assert plan.steps[0].tool_name == "builtin__rank"
    assert plan.steps[0].input["items"] == "{{input.items}}"


def test_a_plan_is_a_list_or_a_mapping_with_steps_from_data_text_or_a_file(tmp_path):
    """A plan loads from a list of steps, a {steps} mapping, YAML text or a file, and a Plan is taken as it is."""
    as_list = load_plan([step()])
    assert load_plan({"steps": [step()]}) == as_list
    path = tmp_path / "plan.yaml"
    path.write_text(RANK_STEP)
    assert load_plan(path).step_ids == ["E1"]
    assert load_plan(as_list) is as_list


@pytest.mark.parametrize(
    ("steps", "field", "message"),
    [
        ([{"tool_name": "builtin__rank", "input": {}}], "steps.0.id", "every step needs an id"),
        ([step("E 1")], "steps.0.id", "expected a name of letters"),
        ([step("input")], "steps.0.id", "other than 'input'"),
        ([step("E1"), step("E1")], "steps.1.id", "'E1' is already the id of step 0"),
        ([{"id": "E1", "input": {}}], "steps.E1.tool_name", "every step needs a tool_name"),
        ([step(tool_name="builtin__sort")], "steps.E1.tool_name", "expected one of builtin__rank, builtin__rerank"),
        ([{"id": "E1", "tool": "builtin__rank"}], "steps.E1", "unknown key 'tool'"),
        ([{"id": "E1", "tool_name": "builtin__rank", "input": ["x"]}], "steps.E1.input", "expected a mapping"),
        ([step(items=[], instructions="x", state={}, topk=3)], "steps.E1.input.topk", "one of builtin__rank's inputs"),
        ([step(items=[], state={})], "steps.E1.input.instructions", "builtin__rank requires it"),
        (["E1"], "steps.0", "expected a step"),
        ([], "steps", "at least one step"),
        ({"name": "x", "steps": []}, "plan", "a mapping with only 'steps'"),
        ("just text", "steps", "expected a list of steps"),
    ],
)
def test_malformed_plans_are_refused_naming_the_field(steps, field, message):
    """Each malformation is an InvalidPlanError whose message starts with the field it is in."""
    with pytest.raises(InvalidPlanError) as caught:
        load_plan(steps)
    assert caught.value.field == field
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"{field}: ")


def test_a_tag_naming_a_later_or_unknown_step_is_refused_before_running():
    """A step may use the input and the steps before it, nothing else."""
    later = [step("E1", items="{{E2.items}}", instructions="x", state={}), step("E2")]
    with pytest.raises(TemplateError) as caught:
        load_plan(later)
    assert caught.value.step == "E1" and caught.value.field == "steps.E1.input.items"
    assert "{{E2.items}} names no earlier step (it can use: input)" in str(caught.value)

    own = [step("E1", items="{{E1.items}}", instructions="x", state={})]
    with pytest.raises(TemplateError, match="refers to its own step"):
        load_plan(own)

    deep = [step("E1"), step("E2", items=[], instructions="Q: {{E9.x}}", state={"q": ["{{input.q}}"]})]
    with pytest.raises(
        TemplateError,
        match=r"steps.E2.input.instructions: \{\{E9.x\}\} names no earlier step \(it can use: input, E1\)",
    ):
        load_plan(deep)


def test_bad_yaml_and_missing_files_are_plan_errors(tmp_path):
    """Unparsable YAML names its line, and a file that cannot be read says so, both as InvalidPlanError."""
    with pytest.raises(InvalidPlanError, match=r"^plan: not valid YAML at line \d+: "):
        load_plan("- id: E1\n  input: [unclosed\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("- id: E1\n  input: [unclosed\n")
    with pytest.raises(InvalidPlanError, match="broken.yaml' is not valid YAML at line"):
        load_plan(broken)
    with pytest.raises(InvalidPlanError, match="cannot read"):
        load_plan(tmp_path / "nope.yaml")


def test_a_plan_file_that_is_not_utf8_is_a_plan_error(tmp_path):
    """Bytes that are not UTF-8 are refused as an InvalidPlanError naming the file, not a decoding crash."""
    binary = tmp_path / "plan.yaml"
    binary.write_bytes(b"\xff\xfe- id: E1\n")
    with pytest.raises(InvalidPlanError, match=r"^plan: '.*plan.yaml' is not UTF-8 text \(byte 0\)$"):
        load_plan(binary)


def test_plan_errors_serialise_with_step_and_field():
    """A plan error's to_dict carries its type, message, step and field."""
    with pytest.raises(PlanError) as caught:
        load_plan([step(), step()])
    assert caught.value.to_dict() == {
        "type": "InvalidPlanError",
        "message": "steps.1.id: 'E1' is already the id of step 0",
        "step": "E1",
        "field": "steps.1.id",
    }


def test_a_plan_round_trips_through_to_dict():
    """Plan.from_data(plan.to_dict()) gives back an equal plan."""
    plan = load_plan(RANK_STEP)
    assert Plan.from_data(plan.to_dict()) == plan


def test_yaml_aliases_that_expand_past_the_limit_are_refused_at_once():
    """A kilobyte of nested YAML aliases (billions of values once expanded) is a plan error at once."""
    import time

    anchors = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    anchors += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = (
        "- id: E1\n  tool_name: builtin__rank\n  input:\n    instructions: q\n"
        f"    state: {{{', '.join(anchors)}}}\n    items: *a8\n"
    )
    assert len(text) < 1200
    started = time.monotonic()
    with pytest.raises(InvalidPlanError, match="at most 100000 values with its aliases expanded"):
        load_plan(text)
    assert time.monotonic() - started < 5.0  # it took 20 s and 1.2 GB when the aliases were expanded
    shared = load_plan(
        "- id: E1\n  tool_name: builtin__rank\n  input:\n    instructions: q\n"
        "    state: &s {a: 1}\n    items: [*s, *s]\n"
    )
    assert shared.steps[0].input["items"] == [{"a": 1}, {"a": 1}]


def test_deep_yaml_and_nan_are_plan_errors_naming_where():
    """YAML nested past the limit (or past the parser) and a .nan input are plan errors, not a crash or a run."""
    step = "- id: E1\n  tool_name: builtin__rank\n  input:\n    instructions: q\n    items: []\n    state: "
    for depth in (100, 5000):
        with pytest.raises(InvalidPlanError, match="nest"):
            load_plan(step + "[" * depth + "]" * depth + "\n")
    with pytest.raises(InvalidPlanError) as raised:
        load_plan(step + ".nan\n")
    assert raised.value.field == "steps.E1.input.state" and "finite number" in str(raised.value)
