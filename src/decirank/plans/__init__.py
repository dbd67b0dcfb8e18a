"""The plan runner: tool steps in YAML, wired together with ``{{...}}`` templates.

    - id: E1
      tool_name: builtin__rank
      input:
        state: "{{input.state}}"
        items: "{{input.items}}"
        instructions: "{{input.instructions}}"
    - id: E2
      tool_name: builtin__filter
      input:
        items: "{{E1.items}}"
        question: "Is it about {{input.state.topic}}?"
        state: "{{input.state}}"

    >>> result = decirank.plans.run_plan(Path("plan.yaml"), {"state": ..., "items": [...], "instructions": "..."})
    >>> result.output          # the last step's output; result.steps holds every step's

The tools are those of the MCP server (:mod:`decirank.tools.registry`).
See :mod:`decirank.plans.templates` for the template rules.
"""

from __future__ import annotations

from .errors import InvalidPlanError, PlanError, StepFailedError, TemplateError
from .plan import Plan, PlanSource, PlanStep, load_plan
from .runner import PlanResult, StepResult, arun_plan, run_plan
from .templates import resolve_templates

__all__ = [
    "InvalidPlanError",
    "Plan",
    "PlanError",
    "PlanResult",
    "PlanSource",
    "PlanStep",
    "StepFailedError",
    "StepResult",
    "TemplateError",
    "arun_plan",
    "load_plan",
    "resolve_templates",
    "run_plan",
]
