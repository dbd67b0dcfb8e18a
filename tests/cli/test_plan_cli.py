"""``decirank plan run`` as a real subprocess: the example three-step plan and the seed's step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import decirank

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SEED_STEP = """\
- id: E1
  tool_name: builtin__rank
  input:
    state: "{{input.state}}"
    items: "{{input.items}}"
    instructions: "{{input.instructions}}"
"""


def decirank_cli(*args, input=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "decirank", *args],
        capture_output=True, text=True, input=input, timeout=120, env=env, check=False,
    )


@pytest.fixture
def example_input(tmp_path):
    """The example's input with the lexical model, and its candidates put in this test's artifact store."""
    store = decirank.ArtifactStore()
    for draft in (EXAMPLES / "plan-artifacts").glob("*.yaml"):
        store.put(f"drafts/{draft.stem}", draft.read_text())
    data = json.loads((EXAMPLES / "plan-input.json").read_text())
    data["model"] = "lexical"
    path = tmp_path / "input.json"
    path.write_text(json.dumps(data))
    return path


def test_the_example_plan_ranks_filters_and_scores(example_input):
    """Rank the candidates, keep those the question holds for, then validate the kept refs' YAML: a parsing one wins."""
    done = decirank_cli("plan", "run", str(EXAMPLES / "plan.yaml"), "--input", str(example_input), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [step["tool_name"] for step in data["steps"]] == ["builtin__rank", "builtin__filter", "builtin__score_list"]
    ranked, kept, scored = (step["output"] for step in data["steps"])

    assert ranked["items"][0]["title"].startswith("nginx reverse proxy config")
    # The filter was given the ranked list, and kept a subset of it in that order.
    assert data["steps"][1]["input"]["items"] == ranked["items"]
    assert [item for item in ranked["items"] if item in kept["items"]] == kept["items"]
    # score_list scored exactly the kept refs, resolved from the store.
    assert sorted(entry["ref"] for entry in scored["ranked"]) == sorted(item["ref"] for item in kept["items"])
    verdicts = {entry["ref"]: entry["verdict"] for entry in scored["ranked"]}
    # agent-b's YAML does not parse; every other candidate's does.
    assert all(verdict == ("INVALID" if ref == "drafts/agent-b" else "VALID") for ref, verdict in verdicts.items())
    assert len(scored["winners"]) == 1 and verdicts[scored["winners"][0]] == "VALID"
    assert data["output"] == scored


def test_the_example_plan_prints_a_table_of_steps(example_input):
    wide = {**os.environ, "COLUMNS": "200"}  # so no cell wraps
    done = decirank_cli("plan", "run", str(EXAMPLES / "plan.yaml"), "--input", str(example_input), env=wide)
    assert done.returncode == 0, done.stderr
    for expected in ("E1", "E2", "E3", "builtin__score_list", "winners: drafts/agent-", "lexical:bm25"):
        assert expected in done.stdout


def test_the_seed_plan_step_runs_verbatim_with_an_input_file(tmp_path):
    """The seed's step as written; the decider role is pointed at lexical through the environment."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(SEED_STEP)
    data = tmp_path / "input.json"
    data.write_text(json.dumps({
        "state": {"question": "How long do fleas live?"},
        "items": ["Sourdough bread", "Flea life cycle: how long fleas live", "Stock markets"],
        "instructions": "Which page answers the question?",
    }))
    env = {**os.environ, "DECIRANK_ROLE_DECIDER": "lexical"}
    done = decirank_cli("plan", "run", str(plan), "--input", str(data), "--json", env=env)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)["output"]
    assert output["items"][0] == "Flea life cycle: how long fleas live"
    assert {"items", "ranked", "none", "no_fit"} <= set(output)


def test_inline_json_and_stdin_input(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(SEED_STEP.replace('instructions: "{{input.instructions}}"', 'instructions: "Which?"\n    model: lexical'))
    inline = decirank_cli("plan", "run", str(plan), "--input", '{"state": "fleas", "items": ["bread", "fleas"]}', "--json")
    assert inline.returncode == 0, inline.stderr
    assert json.loads(inline.stdout)["output"]["items"] == ["fleas", "bread"]
    piped = decirank_cli("plan", "run", str(plan), "--input", "-", "--json", input='{"state": "fleas", "items": ["fleas"]}')
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["output"]["items"] == ["fleas"]


def test_errors_exit_2_with_one_line_naming_the_step(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(SEED_STEP + "    model: lexical\n- id: E2\n  tool_name: builtin__filter\n  input:\n"
                    "    items: \"{{E1.itemz}}\"\n    question: \"Is it good?\"\n    state: {}\n    model: lexical\n")
    bad_path = decirank_cli("plan", "run", str(plan), "--input", '{"state": 1, "items": ["a"], "instructions": "x"}')
    assert bad_path.returncode == 2
    assert "steps.E2.input.items: {{E1.itemz}}: E1 has no 'itemz' (its keys: items, ranked" in bad_path.stderr
    assert "Traceback" not in bad_path.stderr

    tool_error = decirank_cli("plan", "run", str(plan), "--input", '{"state": 1, "items": "a", "instructions": "x"}')
    assert tool_error.returncode == 2
    assert "step E1 (builtin__rank) failed: steps.E1.input.items: expected a list" in tool_error.stderr

    not_json = decirank_cli("plan", "run", str(plan), "--input", "missing.json")
    assert not_json.returncode == 2 and "--input: expected a JSON file or a JSON value" in not_json.stderr

    plan.write_text("- id: E1\n  tool_name: builtin__sort\n")
    unknown_tool = decirank_cli("plan", "run", str(plan))
    assert unknown_tool.returncode == 2 and "steps.E1.tool_name: expected one of builtin__rank" in unknown_tool.stderr
