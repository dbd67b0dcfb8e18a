"""``decirank plan run``: run a YAML plan of tool steps."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from .._jsonpath import MISSING, resolve_dot_path
from ..errors import InvalidInputError
from ..plans import PlanResult, StepResult, run_plan
from ._app import app
from ._output import console, new_table, print_json, short_text

plan_app = typer.Typer(help="Run plans: tool steps wired together with {{...}} templates.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")


def read_plan_input(value: str | None) -> Any:
    """A JSON (or YAML) file, ``-`` for standard input, or a JSON value given inline."""
    if value is None:
        return {}
    if value == "-":
        return _parse_input(sys.stdin.read(), "standard input", as_yaml=False)
    path = Path(value)
    if path.is_file():
        return _parse_input(path.read_text(encoding="utf-8"), value, as_yaml=path.suffix in (".yaml", ".yml"))
    try:
        return json.loads(value)
    except json.JSONDecodeError as error:
        raise InvalidInputError(
            "--input", "a JSON file or a JSON value", detail=f"no file {value!r}, and not JSON: {error.msg}"
        ) from None


def _parse_input(text: str, source: str, *, as_yaml: bool) -> Any:
    try:
        return yaml.safe_load(text) if as_yaml else json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidInputError("--input", "JSON", detail=f"{source}, line {error.lineno}: {error.msg}") from None
    except yaml.YAMLError as error:
        raise InvalidInputError("--input", "YAML", detail=f"{source}: {error}") from None


def summarize_step(step: StepResult) -> str:
    """One line on what a step produced, for the human table."""
    output = step.output
    if step.tool_name == "builtin__rank":
        best = f"; best: {_shown(output['items'][0], step.input.get('describe'))}" if output["items"] else ""
        verdict = "; nothing fits" if output["no_fit"] else ""
        return f"ranked {len(output['items'])}{best}{verdict}"
    if step.tool_name == "builtin__rerank":
        results = output["results"]
        if not results:
            return "0 results"
        document = results[0]["document"]
        return f"{len(results)} results; best: {_shown(document, 'text' if isinstance(document, dict) else None)}"
    if step.tool_name == "builtin__filter":
        return f"kept {output['count']} of {output['count'] + output['dropped_count']}"
    if step.tool_name == "builtin__score_list":
        return f"scored {output['total']}; winners: {', '.join(output['winners']) or 'none'}"
    return short_text(output, 80)


def _shown(item: Any, describe: Any) -> str:
    value = resolve_dot_path(item, describe) if isinstance(describe, str) else item
    return short_text(item if value is MISSING else value, 60)


def _print_table(result: PlanResult) -> None:
    table = new_table("step", "tool", "result", "model", "seconds")
    for step in result.steps:
        table.add_row(
            step.id,
            step.tool_name,
            summarize_step(step),
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
    result = run_plan(plan, read_plan_input(input_value))
    if as_json:
        print_json(result.to_dict())
        return
    _print_table(result)
