"""The parts of the tools' result models that several tools share (pydantic, for schemas).

Each tool's result model lives beside the tool; it describes exactly what the
result's ``to_dict()`` gives, and is the MCP output schema and the HTTP
response model both (the drift test checks real results against it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Notes", "Rows", "TextNoteOut", "ToolOutput", "UsageOut"]

Row = TypeVar("Row")


class Rows(Sequence[Row]):
    """A tool's result as the sequence of its rows: ``len(result)``, ``result[0]``, ``result[:3]``, ``for row in
    result``, as a list of results from other rerankers behaves.

    ``rows`` names the field that holds them (``ranked``, ``results``, ``decisions``, ...); the
    other fields (usage, model, run id) stay attributes.
    """

    __slots__ = ()
    rows: ClassVar[str]

    def _rows(self) -> list[Row]:
        return getattr(self, self.rows)

    def __len__(self) -> int:
        return len(self._rows())

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: Any) -> Any:
        return self._rows()[index]

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows())


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

