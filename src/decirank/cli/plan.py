"""``decirank plan run``: run a YAML plan of tool steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from ..errors import InvalidInputError
from ..plans import PlanResult, StepResult, run_plan
from ..plans.plan import yaml_problem
from ._app import app
from ._output import console, new_table, print_json, read_text, short_text, shown_item

plan_app = typer.Typer(help="Run plans: tool steps wired together with {{...}} templates.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")


def _read_plan_input(value: str | None) -> Any:
    """A JSON (or YAML) file, ``-`` for standard input, or a JSON value given inline."""
    if value is None:
        return {}
    if value != "-" and not Path(value).is_file():
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            detail = f"no file {value!r}, and not JSON: {error.msg}"
            raise InvalidInputError("--input", "a JSON file or a JSON value", detail=detail) from None
    text = read_text(value, "--input", "a JSON file, or - for standard input")
    source = "standard input" if value == "-" else value
    if Path(value).suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise InvalidInputError("--input", "YAML", detail=f"{source}{yaml_problem(error)}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidInputError("--input", "JSON", detail=f"{source}, line {error.lineno}: {error.msg}") from None


def _summarize_step(step: StepResult) -> str:
    """One line on what a step produced, for the human table."""
    output = step.output
    if step.tool_name == "builtin__rank":
        best = f"; best: {shown_item(output['items'][0], step.input.get('describe'), 60)}" if output["items"] else ""
        verdict = "; nothing fits" if output["no_fit"] else ""
        return f"ranked {len(output['items'])}{best}{verdict}"
    if step.tool_name == "builtin__rerank":
        results = output["results"]
        if not results:
            return "0 results"
        best = results[0]["document"]
        return f"{len(results)} results; best: {shown_item(best, 'text' if isinstance(best, dict) else None, 60)}"
    if step.tool_name == "builtin__filter":
        return f"kept {output['count']} of {output['count'] + output['dropped_count']}"
    if step.tool_name == "builtin__score_list":
        return f"scored {output['total']}; winners: {', '.join(output['winners']) or 'none'}"
    return short_text(output, 80)


def _print_table(result: PlanResult) -> None:
    table = new_table("step", "tool", "result", "model", "seconds")
    for step in result.steps:
        table.add_row(
            step.id,
            step.tool_name,
            _summarize_step(step),
            str(step.output.get("model") or "—"),
            f"{step.duration:.2f}",
        )
    console.print(table)
    console.print(f"run {result.run_id} · --json prints every step's input and output", style="dim")


@plan_app.command("run")
def run_command(
    plan: Annotated[
        Path, typer.Argument(metavar="PLAN.yaml", help="The plan: a YAML list of steps (id, tool_name, input).")
    ],
    input_value: Annotated[
        str | None,
        typer.Option("--input", "-i", help="The plan's input: a JSON file, - for stdin, or inline JSON. Default {}."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every step's input and output as JSON.")] = False,
) -> None:
    """Run a plan's steps in order; {{input.x}} and {{E1.items}} tags carry values between them."""
    result = run_plan(plan, _read_plan_input(input_value))
    if as_json:
        print_json(result.to_dict())
        return
    _print_table(result)
