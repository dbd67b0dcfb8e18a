"""The parts of the tools' result models that several tools share (pydantic, for schemas).

Each tool's result model lives beside the tool; it describes exactly what the
result's ``to_dict()`` gives, and is the MCP output schema and the HTTP
response model both (the drift test checks real results against it).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Notes", "ToolOutput", "UsageOut", "TextNoteOut"]


class UsageOut(BaseModel):
    """Tokens, cost and calls of every model call the tool made."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cost: float | None = None
    currency: str = "USD"
    calls: int = 0


class TextNoteOut(BaseModel):
    """How the model read one input: cut short, or not in English; never an error."""

    index: int | None = Field(description="The input's position; null for the query or state every question shares.")
    kind: Literal["cut", "non_english"]
    message: str


Notes = Annotated[
    list[TextNoteOut],
    Field(default_factory=list, description="Inputs the model cut short or that do not look English."),
]


class ToolOutput(BaseModel):
    """What every tool reports beside its own fields: the model(s) that answered, usage and its run."""

    # Results may grow fields; a client reading an older schema keeps working.
    model_config = ConfigDict(extra="allow")

    model: str = Field(description="The model(s) that answered.")
    usage: UsageOut
    run_id: str | None = Field(description="This call's run in the run log.")

