"""filter (the decide gate): an absolute yes or no per item.

Each item is one likelihood question, ``question`` followed by the item, asked
about ``state``; items whose probability reaches ``min_confidence`` are kept.
Unlike rank, an item's fate does not depend on the other items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._sync import run_sync
from ..types.answers import Usage
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ._checks import check_instructions, check_items, check_optional_text, check_probability_threshold
from ._likelihoods import ask_likelihoods, check_per_call, questions_per_call
from .rank import option_texts

__all__ = ["DEFAULT_MIN_CONFIDENCE", "FilterDecision", "FilterResult", "afilter", "filter", "item_question"]

DEFAULT_MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class FilterDecision:
    item: Any
    index: int
    probability: float
    kept: bool

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.item, "index": self.index, "probability": self.probability, "kept": self.kept}


@dataclass(frozen=True)
class FilterResult:
    #: Every item's decision, in input order.
    decisions: list[FilterDecision]
    min_confidence: float = DEFAULT_MIN_CONFIDENCE
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None

    @property
    def items(self) -> list[Any]:
        """The kept items, in input order."""
        return [decision.item for decision in self.decisions if decision.kept]

    @property
    def dropped(self) -> list[Any]:
        return [decision.item for decision in self.decisions if not decision.kept]

    def to_dict(self) -> dict[str, Any]:
        kept = self.items
        dropped = self.dropped
        return {
            "items": kept,
            "count": len(kept),
            "dropped": dropped,
            "dropped_count": len(dropped),
            "decisions": [decision.to_dict() for decision in self.decisions],
            "min_confidence": self.min_confidence,
            "model": self.model,
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
        }


def item_question(question: str, item_text: str) -> str:
    """The question asked of one item: the gate's question, then the item it is about."""
    return f"{question}\nItem: {item_text}"


async def afilter(
    items: Sequence[Any],
    question: str,
    state: Any,
    *,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    describe: str | None = None,
    model: str = DEFAULT_ROLE,
    timeout: float | None = None,
    max_items_per_call: int | None = None,
    base_url: str | None = None,
) -> FilterResult:
    """Keep the items for which ``question`` is likely true, given ``state``.

    ``describe`` is a dot path into each item to show (the whole item otherwise).
    """
    items = check_items(items)
    question = check_instructions(question, "question")
    threshold = check_probability_threshold(min_confidence, "min_confidence")
    if threshold is None:
        threshold = DEFAULT_MIN_CONFIDENCE
    texts = option_texts(items, check_optional_text(describe, "describe"))
    requested_per_call = check_per_call(max_items_per_call, "max_items_per_call")
    inputs = {"items": items, "question": question, "state": state, "min_confidence": threshold, "describe": describe}
    async with ToolCall(
        "filter", model=model, timeout=timeout, backend_options={"base_url": base_url}, inputs=inputs
    ) as call:
        per_call = questions_per_call(call, requested_per_call)
        questions = [item_question(question, text) for text in texts]
        probabilities = await ask_likelihoods(call, state, questions, per_call) if items else []
        decisions = [
            FilterDecision(item, index, probability, probability >= threshold)
            for index, (item, probability) in enumerate(zip(items, probabilities, strict=True))
        ]
        call.record_outputs({"kept": sum(d.kept for d in decisions), "decisions": [d.to_dict() for d in decisions]})
        return FilterResult(decisions, threshold, call.answered_by, call.usage, call.run_id)


def filter(  # shadows the builtin on purpose: it is the tool's name, and the builtin is unused here
    items: Sequence[Any],
    question: str,
    state: Any,
    *,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    describe: str | None = None,
    model: str = DEFAULT_ROLE,
    timeout: float | None = None,
    max_items_per_call: int | None = None,
    base_url: str | None = None,
) -> FilterResult:
    """The sync twin of :func:`afilter`."""
    return run_sync(
        afilter,
        items,
        question,
        state,
        min_confidence=min_confidence,
        describe=describe,
        model=model,
        timeout=timeout,
        max_items_per_call=max_items_per_call,
        base_url=base_url,
    )
