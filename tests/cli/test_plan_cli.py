"""``decirank plan run`` as a real subprocess: the example three-step plan and builtin__rank's documented step."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import decirank
from decirank.plans import InvalidPlanError, load_plan
from tests.cli._run import decirank as decirank_cli
from tests.plans.documented_step import RANK_STEP

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"



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
    """The human output is one row per step, with what it produced and the model that answered."""
    done = decirank_cli("plan", "run", str(EXAMPLES / "plan.yaml"), "--input", str(example_input))
    assert done.returncode == 0, done.stderr
    for expected in ("E1", "E2", "E3", "builtin__score_list", "winners: drafts/agent-", "lexical:bm25"):
        assert expected in done.stdout


def test_refs_missing_from_the_artifact_store_are_named_and_exit_1(tmp_path):
    """With no drafts stored, E3 scores nothing: stderr names the refs and how to store them, and the exit is 1."""
    data = json.loads((EXAMPLES / "plan-input.json").read_text()) | {"model": "lexical"}
    path = tmp_path / "input.json"
    path.write_text(json.dumps(data))
    done = decirank_cli("plan", "run", str(EXAMPLES / "plan.yaml"), "--input", str(path))
    assert done.returncode == 1, done.stderr
    assert "scored 0 of 4 (4 not in the artifact store)" in done.stdout
    assert done.stderr.startswith("warning: step E3: 4 of 4 refs have no artifact in the store (drafts/agent-")
    assert "decirank artifacts put REF FILE" in done.stderr and "Traceback" not in done.stderr
    as_json = decirank_cli("plan", "run", str(EXAMPLES / "plan.yaml"), "--input", str(path), "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["output"]["winners"] == []


def test_the_documented_rank_step_runs_verbatim_with_an_input_file(tmp_path):
    """builtin__rank's documented step as written; the decider role is pointed at lexical through the environment."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(RANK_STEP)
    data = tmp_path / "input.json"
    question = {
        "state": {"question": "How long do fleas live?"},
        "items": ["Sourdough bread", "Flea life cycle: how long fleas live", "Stock markets"],
        "instructions": "Which page answers the question?",
    }
    data.write_text(json.dumps(question))
    env = {**os.environ, "DECIRANK_ROLE_DECIDER": "lexical"}
    done = decirank_cli("plan", "run", str(plan), "--input", str(data), "--json", env=env)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)["output"]
    assert output["items"][0] == "Flea life cycle: how long fleas live"
    assert {"items", "ranked", "none", "no_fit"} <= set(output)


def test_inline_json_and_stdin_input(tmp_path):
    """--input takes inline JSON, or - for standard input."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        RANK_STEP.replace('instructions: "{{input.instructions}}"', 'instructions: "Which?"\n    model: lexical')
    )
    inline_input = '{"state": "fleas", "items": ["bread", "fleas"]}'
    inline = decirank_cli("plan", "run", str(plan), "--input", inline_input, "--json")
    assert inline.returncode == 0, inline.stderr
    assert json.loads(inline.stdout)["output"]["items"] == ["fleas", "bread"]
    piped_input = '{"state": "fleas", "items": ["fleas"]}'
    piped = decirank_cli("plan", "run", str(plan), "--input", "-", "--json", input=piped_input)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["output"]["items"] == ["fleas"]


def test_errors_exit_2_with_one_line_naming_the_step(tmp_path):
    """A bad template path, a tool's refusal, a bad --input and an unknown tool each name where they are."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        RANK_STEP + "    model: lexical\n- id: E2\n  tool_name: builtin__filter\n  input:\n"
        '    items: "{{E1.itemz}}"\n    question: "Is it good?"\n    state: {}\n    model: lexical\n'
    )
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


def test_a_broken_input_file_is_one_line_naming_it(tmp_path):
    """An --input file of broken YAML, broken JSON or bytes that are not UTF-8 is one line on stderr, exit 2."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(RANK_STEP)
    broken = {"input.yaml": b"a: [\n", "input.json": b'{"a":\n', "binary.json": b"\xff\xfe{}"}
    for name, content in broken.items():
        (tmp_path / name).write_bytes(content)
        done = decirank_cli("plan", "run", str(plan), "--input", str(tmp_path / name))
        assert done.returncode == 2, name
        assert done.stderr.startswith("error: --input: expected ") and len(done.stderr.strip().splitlines()) == 1


def alias_bomb(width: int = 10, depth: int = 9) -> str:
    """About a kilobyte of YAML whose aliases, 10 wide and 9 deep, stand for a billion values."""
    lines = ["a0: &a0 [x]"]
    for level in range(1, depth + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_plan_is_refused_within_a_second_as_the_python_api_refuses_it(tmp_path):
    """``plan run`` on a 1 KB plan of nested aliases: exit 2 at once, with load_plan's own message."""
    plan = tmp_path / "bomb.yaml"
    plan.write_text("steps: " + "\n" + "\n".join("  " + line for line in alias_bomb().splitlines()))
    assert len(plan.read_bytes()) < 1500
    with pytest.raises(InvalidPlanError) as raised:
        load_plan(plan)
    started = time.monotonic()
    done = decirank_cli("plan", "run", str(plan), timeout=60)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: {raised.value}"
    assert took < 10  # the interpreter's start included
    from decirank.cli import main

    started = time.monotonic()
    assert main(["plan", "run", str(plan)]) == 2
    assert time.monotonic() - started < 1.0  # the refusal itself, in this process


def test_an_alias_bomb_as_input_yaml_is_refused_naming_input(tmp_path):
    """``--input bomb.yaml`` is refused at once naming --input and the limit, not read into gigabytes."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "- id: E1\n  tool_name: builtin__rank\n  input:\n    items: '{{input.items}}'\n"
        "    instructions: q\n    state: null\n    model: lexical\n"
    )
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    done = decirank_cli("plan", "run", str(plan), "--input", str(bomb), timeout=60)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: --input: expected YAML") and "at most 100000 values with its aliases" in line, line


def test_yaml_input_too_deep_or_with_a_huge_integer_is_one_line(tmp_path):
    """Nesting past the limit and a 5000-digit integer in --input YAML: exit 2 and one line naming --input."""
    plan = tmp_path / "plan.yaml"
    plan.write_text("- id: E1\n  tool_name: builtin__rank\n  input: {items: [a], instructions: q, state: null}\n")
    for name, text in (("deep.yaml", "[" * 5000 + "]" * 5000), ("big.yaml", "n: " + "9" * 5000)):
        source = tmp_path / name
        source.write_text(text)
        done = decirank_cli("plan", "run", str(plan), "--input", str(source), timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().startswith("error: --input:") and len(done.stderr.strip().splitlines()) == 1
