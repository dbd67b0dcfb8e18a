"""Running plans through the Python API, on the lexical backend."""

from __future__ import annotations

import anyio
import pytest

from decirank.errors import InvalidInputError, UnknownModelError
from decirank.plans import PlanResult, StepFailedError, TemplateError, arun_plan, load_plan, run_plan
from decirank.stores.runlog import current_runlog
from tests.plans.documented_step import RANK_STEP

PAGES = [
    {"title": "bread baking at home", "url": "b"},
    {"title": "fleas and their life cycle", "url": "a"},
    {"title": "stock market basics", "url": "c"},
]

TWO_STEPS = """
- id: E1
  tool_name: builtin__rank
  input:
    items: "{{input.pages}}"
    describe: title
    instructions: "Which page is about {{input.topic}}?"
    state: {topic: "{{input.topic}}"}
    top_k: 2
    model: lexical
- id: E2
  tool_name: builtin__rerank
  input:
    query: "{{input.topic}}"
    documents: ["{{E1.ranked.0.item.title}}", "{{E1.ranked.1.item.title}}", "best of {{E1.items.length}}"]
    model: lexical
"""


def test_the_documented_rank_step_runs_as_written(monkeypatch):
    """The documented step, verbatim (no model: the decider role, here pointed at lexical), ranks the input's items."""
    monkeypatch.setenv("DECIRANK_ROLE_DECIDER", "lexical")
    result = run_plan(RANK_STEP, {"state": {"question": "flea life cycle"}, "items": ["bread", "flea facts", "stocks"],
                                  "instructions": "Which one answers the question?"})
    assert isinstance(result, PlanResult)
    assert [step.id for step in result.steps] == ["E1"]
    assert result.output["items"][0] == "flea facts"
    assert result.output["model"] == "lexical:bm25"
    assert result.steps[0].input["items"] == ["bread", "flea facts", "stocks"]


def test_outputs_flow_into_later_steps_through_templates():
    """A step sees earlier outputs spliced raw, and stringified inside text."""
    result = run_plan(TWO_STEPS, {"pages": PAGES, "topic": "fleas"})
    rank, rerank = result.steps
    assert rank.output["items"][0]["title"] == "fleas and their life cycle"
    assert rerank.input["documents"][0] == "fleas and their life cycle"
    assert rerank.input["documents"][2] == "best of 2"
    assert result.output is rerank.output
    assert result.step("E1") is rank
    data = result.to_dict()
    assert [step["id"] for step in data["steps"]] == ["E1", "E2"]
    assert data["output"]["results"][0]["document"] == "fleas and their life cycle"
    assert data["steps"][0]["input"]["instructions"] == "Which page is about fleas?"


def test_the_async_twin_gives_the_same_result():
    """arun_plan gives the same steps and outputs as run_plan."""
    def answers(result: PlanResult) -> list:
        return [result.step("E1").output["ranked"], result.step("E2").output["results"]]

    sync = run_plan(TWO_STEPS, {"pages": PAGES, "topic": "fleas"})
    async_result = anyio.run(arun_plan, load_plan(TWO_STEPS), {"pages": PAGES, "topic": "fleas"})
    assert answers(async_result) == answers(sync)


def test_a_tool_error_names_the_step_and_the_located_field():
    """Bad input to a tool is located as steps.<id>.input.<field>, and the tool's own error is kept."""
    with pytest.raises(StepFailedError) as caught:
        run_plan(TWO_STEPS, {"pages": "not a list", "topic": "fleas"})
    error = caught.value
    assert error.step == "E1" and error.tool_name == "builtin__rank"
    assert error.field == "steps.E1.input.items"
    assert str(error) == "step E1 (builtin__rank) failed: steps.E1.input.items: expected a list, got str 'not a list'"
    assert isinstance(error.error, InvalidInputError) and error.__cause__ is error.error
    assert error.to_dict()["error"]["field"] == "items"


def test_a_model_error_in_a_later_step_names_that_step():
    """An unknown model in the second step fails as that step, carrying the UnknownModelError."""
    plan = load_plan(TWO_STEPS).to_dict()
    plan["steps"][1]["input"]["model"] = "lexicl"
    with pytest.raises(StepFailedError) as caught:
        run_plan(plan, {"pages": PAGES, "topic": "fleas"})
    assert caught.value.step == "E2" and isinstance(caught.value.error, UnknownModelError)
    assert str(caught.value).startswith(
        "step E2 (builtin__rerank) failed: UnknownModelError: unknown model or role 'lexicl'"
    )


def test_a_path_missing_at_run_time_is_a_template_error_listing_the_keys():
    """References to the input are only checked against real values when the step runs."""
    with pytest.raises(TemplateError) as caught:
        run_plan(TWO_STEPS, {"pages": PAGES, "subject": "fleas"})
    assert caught.value.step == "E1"
    assert "{{input.topic}}: input has no 'topic' (its keys: pages, subject)" in str(caught.value)


def test_a_plan_is_a_parent_run_with_its_steps_as_children():
    """The run log holds the plan's run, its steps' tool runs under it, and their usage rolled up."""
    result = run_plan(TWO_STEPS, {"pages": PAGES, "topic": "fleas"})
    run = current_runlog().run(result.run_id)
    assert run["tool"] == "plan" and run["status"] == "success"
    children = {child["id"]: child for child in run["children"]}
    assert set(children) == {step.output["run_id"] for step in result.steps}
    assert sorted(child["tool"] for child in children.values()) == ["rank", "rerank"]
    assert run["calls"] == sum(child["calls"] for child in children.values()) == 2
    assert run["outputs"]["steps"][1]["id"] == "E2"


def test_a_failed_plan_is_recorded_as_failed_with_the_step_error():
    """A plan whose step fails is a failed run in the run log, with the located step error."""
    with pytest.raises(StepFailedError):
        run_plan(TWO_STEPS, {"pages": "not a list", "topic": "fleas"})
    plan_run = current_runlog().runs(tool="plan")[0]
    assert plan_run["status"] == "failed" and plan_run["error_type"] == "StepFailedError"
    assert "steps.E1.input.items" in plan_run["error"]


def test_the_default_model_runs_a_plan_end_to_end():
    """With the embedded model installed, a plan without any model setting ranks sensibly."""
    pytest.importorskip("decirank.backends.local")
    result = run_plan(
        RANK_STEP,
        {
            "state": {"question": "How long do fleas live?"},
            "items": ["Sourdough bread recipe", "The flea life cycle and lifespan", "Stock market basics"],
            "instructions": "Which page answers the question?",
        },
    )
    assert result.output["items"][0] == "The flea life cycle and lifespan"
    assert result.output["model"].startswith("local")


def test_a_plan_calibrates_then_filters_with_the_calibration_it_stored():
    """builtin__calibrate in a plan stores its calibration by name; a later step's filter promises recall with it."""
    from tests.calibration_rows import PET_QUESTION, PET_STATE, pet_rows

    plan = """
- id: E1
  tool_name: builtin__calibrate
  input: {name: pets, question: "{{input.question}}", rows: "{{input.rows}}", state: "{{input.state}}",
          model: lexical}
- id: E2
  tool_name: builtin__filter
  input: {items: "{{input.items}}", question: "{{input.question}}", state: "{{input.state}}",
          calibration: "{{E1.name}}", target_recall: 0.8, model: lexical}
"""
    items = ["a cat at noon", "a lamp by the door", "a puppy on the sofa"]
    result = run_plan(plan, {"question": PET_QUESTION, "state": PET_STATE, "rows": pet_rows(), "items": items})
    calibrated, kept = result.steps
    assert calibrated.output["saved"] and calibrated.output["rows"] == 40
    assert kept.output["calibration"] == "pets" and kept.output["promise"]["target_recall"] == 0.8
    assert kept.output["items"] == ["a cat at noon", "a puppy on the sofa"]
