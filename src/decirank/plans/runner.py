"""Running a plan: each step's templates resolved from the input and earlier outputs, in order.

A plan is one run in the run log (tool ``plan``) and its steps' tool runs are
its children, so ``decirank runs show <plan run>`` lists them and the plan's
usage is the sum of theirs, failed steps included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio

from .._sync import run_sync
from ..errors import DecirankError, error_record
from ..stores.runlog import (
    RunLog,
    current_parent_run,
    current_runlog,
    new_run_id,
    note_run_started,
    summarize,
    under_parent_run,
)
from ..tools.registry import call_tool
from ..types.answers import Usage
from .errors import StepFailedError
from .plan import Plan, PlanSource, load_plan
from .templates import INPUT_ROOT, resolve_templates

__all__ = ["PlanResult", "StepResult", "arun_plan", "run_plan"]


@dataclass(frozen=True)
class StepResult:
    id: str
    tool_name: str
    #: The input the tool was called with, templates resolved.
    input: dict[str, Any]
    #: The tool's JSON result.
    output: dict[str, Any]
    duration: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool_name": self.tool_name,
            "input": self.input,
            "output": self.output,
            "duration_ms": round(self.duration * 1000, 3),
        }


@dataclass(frozen=True)
class PlanResult:
    run_id: str
    steps: list[StepResult]

    @property
    def output(self) -> dict[str, Any]:
        """The last step's output: what the plan produced."""
        return self.steps[-1].output

    def step(self, step_id: str) -> StepResult:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "steps": [step.to_dict() for step in self.steps], "output": self.output}


async def arun_plan(plan: PlanSource, input: Any = None) -> PlanResult:
    """Run ``plan``'s steps in order on ``input`` (any JSON value, ``{}`` when None).

    ``plan`` is a :class:`Plan`, its parsed data, YAML text, or a
    :class:`pathlib.Path` to a YAML file. The whole plan is checked before
    the first step runs; a failing step raises :class:`StepFailedError`,
    which names the step and carries the tool's own error.
    """
    checked: Plan = load_plan(plan)
    plan_input = {} if input is None else input
    record = _PlanRecord(checked, plan_input)
    results: list[StepResult] = []
    try:
        with under_parent_run(record.run_id):
            await _run_steps(checked, plan_input, results)
    except BaseException as error:
        record.close(error, results)
        raise
    record.close(None, results)
    return PlanResult(record.run_id, results)


async def _run_steps(plan: Plan, plan_input: Any, results: list[StepResult]) -> None:
    """Run the steps in order, appending each one's result to ``results`` as it finishes."""
    context: dict[str, Any] = {INPUT_ROOT: plan_input}
    for step in plan.steps:
        arguments = resolve_templates(step.input, context, f"steps.{step.id}.input", step.id)
        started = time.perf_counter()
        try:
            output = await call_tool(step.tool_name, arguments)
        except DecirankError as error:
            raise StepFailedError(step.id, step.tool_name, error) from error
        results.append(StepResult(step.id, step.tool_name, arguments, output, time.perf_counter() - started))
        context[step.id] = output


class _PlanRecord:
    """The plan's own run in the run log, when one is on."""

    def __init__(self, plan: Plan, plan_input: Any) -> None:
        self.run_id = new_run_id()
        note_run_started(self.run_id)
        self.runlog: RunLog | None = current_runlog()
        self._clock = time.perf_counter()
        if self.runlog is not None:
            self.runlog.start_run(
                self.run_id,
                tool="plan",
                role=None,
                inputs=summarize({"plan": plan.to_dict(), "input": plan_input}),
                started=time.time(),
                parent_id=current_parent_run(),
            )

    def close(self, error: BaseException | None, results: list[StepResult]) -> None:
        if self.runlog is None:
            return
        if error is None:
            status = "success"
        elif isinstance(error, anyio.get_cancelled_exc_class() | KeyboardInterrupt):
            status = "cancelled"
        else:
            status = "failed"
        children = self.runlog.run(self.run_id)["children"]
        models = sorted({child["model"] for child in children if child["model"]})
        self.runlog.finish_run(
            self.run_id,
            status=status,
            models=", ".join(models) or None,
            outputs=summarize(
                {
                    "steps": [
                        {"id": r.id, "tool_name": r.tool_name, "run_id": r.output.get("run_id")} for r in results
                    ],
                    "output": results[-1].output if results and error is None else None,
                }
            ),
            error=error_record(error) if status == "failed" else None,
            usage=_children_usage(children).to_dict(),
            ended=time.time(),
            duration=time.perf_counter() - self._clock,
        )


def _children_usage(children: list[dict[str, Any]]) -> Usage:
    """The steps' usage summed from their runs, so a failed step's spending counts too."""
    total = Usage()
    for child in children:
        total = total + Usage(
            input_tokens=child["input_tokens"] or 0,
            output_tokens=child["output_tokens"] or 0,
            cached_tokens=child["cached_tokens"] or 0,
            cost=child["cost"],
            currency=child["currency"] or total.currency,
            calls=child["calls"] or 0,
        )
    return total



def run_plan(plan: PlanSource, input: Any = None) -> PlanResult:
    """The sync twin of :func:`arun_plan`."""
    return run_sync(arun_plan, plan, input)
