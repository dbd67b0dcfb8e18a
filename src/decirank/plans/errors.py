"""The errors of the plan runner; each names the step and, where there is one, the field.

    DecirankError
    └── PlanError                 names ``step`` and ``field`` (``steps.E2.input.items``)
        ├── InvalidPlanError      the plan is malformed; nothing ran
        ├── TemplateError         a ``{{...}}`` tag names a step or path that is not there
        └── StepFailedError       a step's tool failed; ``error`` is the tool's own typed error
"""

from __future__ import annotations

from typing import Any

from ..errors import DecirankError, InvalidInputError

__all__ = ["InvalidPlanError", "PlanError", "StepFailedError", "TemplateError"]


class PlanError(DecirankError):
    """A plan could not be run as written."""

    def __init__(self, message: str, *, step: str | None = None, field: str | None = None):
        self.step = step
        self.field = field
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if self.step is not None:
            data["step"] = self.step
        if self.field is not None:
            data["field"] = self.field
        return data


class InvalidPlanError(PlanError):
    """The plan is malformed: a step without an id or tool, a duplicate id, an unknown tool or input."""

    def __init__(self, field: str, problem: str, *, step: str | None = None):
        super().__init__(f"{field}: {problem}", step=step, field=field)


class TemplateError(PlanError):
    """A template tag names a step that has not run, or a path its value does not have."""

    def __init__(self, field: str, problem: str, *, step: str | None = None):
        super().__init__(f"{field}: {problem}", step=step, field=field)


class StepFailedError(PlanError):
    """A step's tool raised ``error``; bad tool input is located as ``steps.<id>.input.<field>``."""

    def __init__(self, step: str, tool_name: str, error: DecirankError):
        self.tool_name = tool_name
        self.error = error
        if isinstance(error, InvalidInputError):
            field: str | None = f"steps.{step}.input.{error.field}"
            # The tool's message starts with its own field; located, it reads "steps.E2.input.items: expected ...".
            reason = f"{field}: {str(error).removeprefix(f'{error.field}: ')}"
        else:
            field = None
            reason = f"{type(error).__name__}: {error}"
        super().__init__(f"step {step} ({tool_name}) failed: {reason}", step=step, field=field)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "tool_name": self.tool_name, "error": self.error.to_dict()}
