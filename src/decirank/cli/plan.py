"""``decirank plan run``: run a YAML plan of tool steps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .._jsonpath import JsonProblem, loads_json
from .._yaml import YamlProblem, load_yaml
from ..errors import InvalidInputError
from ..plans import PlanResult, StepResult, run_plan
from ..plans.errors import InvalidPlanError
from ._app import app
from ._output import (
    bad_json,
    check_text,
    console,
    error_console,
    new_table,
    parse_json,
    path_kind,
    print_json,
    print_table,
    read_text,
    short_text,
    shown_item,
    source_name,
)

#: The exit status of a plan whose score_list step found none of its refs in the artifact store.
EXIT_NOTHING_SCORED = 1

plan_app = typer.Typer(help="Run plans: tool steps wired together with {{...}} templates.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")


def _load_yaml(text: str, field: str, source: str) -> Any:
    """YAML through decirank's one guarded reader, then the check JSON gets against lone surrogates."""
    try:
        value = load_yaml(text, what_is_wrong=f"{source} is not valid YAML")
    except YamlProblem as problem:
        if field == "plan":  # as the Python API says it (load_plan)
            raise InvalidPlanError("plan", problem.problem) from None
        raise InvalidInputError(field, "YAML", detail=problem.problem) from None
    return check_text(value, field, "YAML", source)


def _read_plan(path: Path) -> Any:
    """The plan file's steps, parsed here so that its YAML gets :func:`_load_yaml`'s protections."""
    source = str(path)
    return _load_yaml(read_text(source, "plan", "a YAML plan file"), "plan", repr(source))


def _read_plan_input(value: str | None) -> Any:
    """A JSON (or YAML) file, ``-`` for standard input, or a JSON value given inline."""
    if value is None:
        return {}
    if value != "-" and path_kind(value) is None:
        try:
            return loads_json(value)
        except JsonProblem as problem:
            if not problem.syntax:
                raise bad_json("--input", "a JSON file or a JSON value", problem) from None
            detail = f"no file {value!r}, and not JSON: {problem.problem}"
            raise InvalidInputError("--input", "a JSON file or a JSON value", detail=detail) from None
    text = read_text(value, "--input", "a JSON file, or - for standard input")
    source = source_name(value)
    if Path(value).suffix in (".yaml", ".yml"):
        return _load_yaml(text, "--input", source)
    return parse_json(text, "--input", "JSON", source)


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
    if step.tool_name == "builtin__calibrate":
        before, after = output["before"]["ece"], output["after"]["ece"]
        return f"calibrated {output['name']} on {output['rows']} rows: {output['method']}, ECE {before:.3f} -> {after:.3f}"
    if step.tool_name == "builtin__score_list":
        unknown = _unknown_refs(step)
        scored = f"scored {output['total'] - len(unknown)} of {output['total']}"
        missing = f" ({len(unknown)} not in the artifact store)" if unknown else ""
        return f"{scored}{missing}; winners: {', '.join(output['winners']) or 'none'}"
    return short_text(output, 80)


def _unknown_refs(step: StepResult) -> list[str]:
    """The refs a score_list step could not score: nothing, or nothing but blanks, stored under them."""
    if step.tool_name != "builtin__score_list":
        return []
    return [entry["ref"] for entry in step.output["ranked"] if entry["verdict"] == "UNKNOWN"]


def _report_unknown_refs(result: PlanResult) -> bool:
    """Say on stderr which refs were not in the artifact store; True when a score_list step scored none."""
    nothing_scored = False
    for step in result.steps:
        unknown = _unknown_refs(step)
        if not unknown:
            continue
        total = step.output["total"]
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        error_console.print(
            f"warning: step {step.id}: {len(unknown)} of {total} refs have no artifact in the store ({shown}); "
            "store each with: decirank artifacts put REF FILE",
            highlight=False,
            soft_wrap=True,
        )
        nothing_scored = nothing_scored or len(unknown) == total
    return nothing_scored


def _print_table(result: PlanResult) -> None:
    table = new_table("step", "tool", "result", "model", "seconds", wrap=("result", "model"))
    for step in result.steps:
        table.add_row(
            step.id,
            step.tool_name,
            _summarize_step(step),
            str(step.output.get("model") or "—"),
            f"{step.duration:.2f}",
        )
    print_table(table)
    console.print(f"run {result.run_id} · --json prints every step's input and output", style="dim", soft_wrap=True)


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
    """Run a plan's steps in order; {{input.x}} and {{E1.items}} tags carry values between them.

    Refs a score_list step finds no artifact for are named on stderr; when it finds none, the exit status is 1.
    """
    result = run_plan(_read_plan(plan), _read_plan_input(input_value))
    if as_json:
        print_json(result.to_dict())
    else:
        _print_table(result)
    if _report_unknown_refs(result):
        raise typer.Exit(EXIT_NOTHING_SCORED)
