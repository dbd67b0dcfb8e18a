"""rank (``builtin__rank``): one choice question over a whole list.

The items become the options of one choice question. Everything that decides
the outcome without a model (checking input, the order options are shown in,
splitting long lists, reading answers back, sorting) is plain functions
below; :func:`arank` only asks the questions they build.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, Field

from .._jsonpath import MISSING, digest, resolve_dot_path, to_text
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ..errors import InvalidInputError, LimitExceededError
from ..types.answers import ChoiceAnswer, Usage
from ..types.questions import ChoiceQuestion, DecisionRequest
from ._checks import check_instructions, check_items, check_optional_text, check_state, check_top_k
from ._definition import Cli, ToolDefinition, sync_twin_of
from ._outputs import Rows, ToolOutput
from ._params import ApiKey, BaseUrl, DescribeParam, FromOne, ItemList, ModelParam, StateParam, Text, Timeout

__all__ = ["RANK", "RankOutput", "RankResult", "RankedItem", "arank", "rank"]

NONE_KEY = "none"


@dataclass(frozen=True)
class RankedItem:
    item: Any
    #: The item's position in the input list.
    index: int
    #: Its probability in the final choice; None when it did not reach the final.
    probability: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.item, "index": self.index, "probability": self.probability}


@dataclass(frozen=True)
class RankResult(Rows[RankedItem]):
    """A sequence of its ``ranked``; ``to_dict()`` gives the tool's JSON shape."""

    rows = "ranked"
    ranked: list[RankedItem]
    #: The probability of the "nothing fits" option, when one was asked for.
    none: float | None = None
    #: True when "nothing fits" beat every item.
    no_fit: bool = False
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None

    @property
    def items(self) -> list[Any]:
        return [entry.item for entry in self.ranked]

    def top_k(self, k: int) -> list[RankedItem]:
        """The best ``k`` entries of :attr:`ranked`, best first (fewer when there are fewer)."""
        return self.ranked[: check_top_k(k, allow_zero=False, field="k")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "ranked": [entry.to_dict() for entry in self.ranked],
            "none": self.none,
            "no_fit": self.no_fit,
            "model": self.model,
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
        }


class RankedItemOut(BaseModel):
    item: Any
    index: int = Field(description="The item's position in the input.")
    probability: float | None = Field(description="Null for items that did not reach the final choice.")


class RankOutput(ToolOutput):
    """The result of rank: the items best first, each with its probability."""

    items: list[Any] = Field(description="The items, highest probability first.")
    ranked: list[RankedItemOut] = Field(
        description="Each item with its input index and probability (null: not in the final choice)."
    )
    none: float | None = Field(description="The probability of the 'nothing fits' option.")
    no_fit: bool = Field(description="True when 'nothing fits' beat every item.")


@dataclass(frozen=True)
class _Plan:
    """A checked rank request: each item's option text and the order options are shown in."""

    items: list[Any]
    option_texts: list[str]
    instructions: str
    state: Any
    none: str | None
    top_k: int | None
    #: Input indices in presentation order.
    order: list[int]


def presentation_order(items: Sequence[Any]) -> list[int]:
    """A shuffle seeded by the *set* of items, so the input order cannot change it.

    Each item's place is the hash of the item together with a digest of the
    whole multiset; identical items tie and keep their input order.
    """
    item_digests = [digest(item) for item in items]
    list_digest = hashlib.sha256(b"".join(sorted(item_digests))).digest()
    keys = [hashlib.sha256(list_digest + item_digest).digest() for item_digest in item_digests]
    return sorted(range(len(items)), key=lambda index: (keys[index], index))


def item_text(item: Any, describe: str | None) -> str | None:
    """What an item shows: its ``describe`` dot path, else the whole item; None when the path is missing."""
    value = item if describe is None else resolve_dot_path(item, describe)
    return None if value is MISSING else to_text(value)


def option_texts(items: Sequence[Any], describe: str | None) -> list[str]:
    texts = []
    for index, item in enumerate(items):
        text = item_text(item, describe)
        if text is None:
            raise InvalidInputError(
                "describe", "a dot path present in every item", detail=f"item {index} has no {describe!r}"
            )
        texts.append(text)
    return texts


def plan_rank(
    items: Any, instructions: Any, state: Any, *, describe: Any, none: Any, top_k: Any
) -> _Plan:
    items = check_items(items)
    instructions = check_instructions(instructions)
    describe = check_optional_text(describe, "describe")
    none = check_optional_text(none, "none")
    top_k = check_top_k(top_k, allow_zero=False)
    # With no state, the question is what the items are judged against: rank(docs, "how long do fleas
    # live") reads the query as rank(docs, "Which answers it?", {"question": query}) does.
    state = instructions if state is None else check_state(state)
    return _Plan(
        items=items,
        option_texts=option_texts(items, describe),
        instructions=instructions,
        state=state,
        none=none,
        top_k=top_k,
        order=presentation_order(items),
    )


def option_key(position: int) -> str:
    """Keys that sort as they are shown: servers may sort option keys."""
    return f"{position:03d}"


def choice_request(plan: _Plan, indices: Sequence[int], *, with_none: bool) -> DecisionRequest:
    options = {option_key(position): plan.option_texts[index] for position, index in enumerate(indices)}
    if with_none:
        options[NONE_KEY] = plan.none or ""
    return DecisionRequest(
        state=plan.state, questions={"rank": ChoiceQuestion(plan.instructions, options)}
    )


def read_choice(answer: ChoiceAnswer, indices: Sequence[int]) -> tuple[dict[int, float], float | None]:
    """Item probabilities by input index, and the "nothing fits" probability if asked."""
    probabilities = {index: answer.probabilities[option_key(position)] for position, index in enumerate(indices)}
    return probabilities, answer.probabilities.get(NONE_KEY)


def split_evenly(order: Sequence[int], capacity: int) -> list[list[int]]:
    """Chunks of at most ``capacity``, as equal in size as possible, order kept."""
    count = math.ceil(len(order) / capacity)
    size, extra = divmod(len(order), count)
    chunks, start = [], 0
    for number in range(count):
        end = start + size + (1 if number < extra else 0)
        chunks.append(list(order[start:end]))
        start = end
    return chunks


def by_probability(probabilities: dict[int, float]) -> list[int]:
    """Highest first; ties keep input order."""
    return sorted(probabilities, key=lambda index: (-probabilities[index], index))


@dataclass
class _Round:
    final: dict[int, float]
    none: float | None
    #: Items that did not reach the final, best first: later rounds' losers before earlier ones'.
    eliminated: list[int]


async def _rank_round(call: ToolCall, plan: _Plan, order: list[int], capacity: int) -> _Round:
    if len(order) <= capacity:
        with_none = plan.none is not None
        response = await call.ask(choice_request(plan, order, with_none=with_none))
        final, none_probability = read_choice(response.answers["rank"], order)
        return _Round(final, none_probability, [])

    chunks = split_evenly(order, capacity)
    responses = await call.ask_all([choice_request(plan, chunk, with_none=False) for chunk in chunks])
    per_chunk = max(1, capacity // len(chunks))
    finalists: set[int] = set()
    eliminated: dict[int, float] = {}
    for chunk, response in zip(chunks, responses, strict=True):
        chunk_probabilities, _ = read_choice(response.answers["rank"], chunk)
        ordered = by_probability(chunk_probabilities)
        finalists.update(ordered[:per_chunk])
        eliminated.update({index: chunk_probabilities[index] for index in ordered[per_chunk:]})
    # Finalists keep the seeded presentation order; very long lists recurse.
    next_round = await _rank_round(call, plan, [index for index in order if index in finalists], capacity)
    return _Round(next_round.final, next_round.none, next_round.eliminated + by_probability(eliminated))


def _items_per_call(plan: _Plan, max_options: int) -> int:
    """Items one choice may carry: one option is kept free for "nothing fits", as the documented
    254-item chunks imply. Chunking needs room for two items besides it."""
    capacity = max_options - 1
    if capacity >= 2:
        return capacity
    if len(plan.items) + (plan.none is not None) <= max_options:
        return len(plan.items)
    raise LimitExceededError(
        f"ranking {len(plan.items)} items needs choices of at least 3 options; the model takes {max_options}"
    )


def build_result(plan: _Plan, outcome: _Round, *, model: str, usage: Usage, run_id: str | None) -> RankResult:
    ranked = [RankedItem(plan.items[i], i, outcome.final[i]) for i in by_probability(outcome.final)]
    ranked += [RankedItem(plan.items[i], i, None) for i in outcome.eliminated]
    if plan.top_k is not None:
        ranked = ranked[: plan.top_k]
    if plan.items:
        no_fit = outcome.none is not None and all(outcome.none > p for p in outcome.final.values())
    else:
        # No item can fit an empty list; no probability is invented for "nothing fits".
        no_fit = plan.none is not None
    return RankResult(ranked, outcome.none, no_fit, model, usage, run_id)


async def arank(
    items: Annotated[ItemList, Field(description="The list, usually a template like {{E1.results}}"), Cli(argument=True, read="items")],
    instructions: Annotated[Text, Field(description="The choice question"), Cli(flags=("--instructions", "-i"))],
    state: StateParam = None,
    *,
    describe: DescribeParam = None,
    none: Annotated[Text | None, Field(description="Text of a 'nothing fits' option")] = None,
    top_k: Annotated[FromOne | None, Field(description="Keep only the best k"), Cli(flags=("--top-k", "-k"))] = None,
    model: ModelParam = DEFAULT_ROLE,
    timeout: Timeout = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
) -> RankResult:
    """Rank ``items`` (any iterable) against ``instructions`` in the context of ``state``.

    With no ``state``, the question itself is the context: ``rank(docs, "how long do fleas live")``
    ranks as ``rank(docs, "Which passage answers the question?", {"question": "how long do fleas
    live"})`` does. ``describe`` is a dot path into each item to show as its option (the whole
    item otherwise); ``none`` adds a "nothing fits" option; ``top_k`` keeps the
    best k. Lists longer than the model's option limit are ranked in chunks
    sent together, whose best items meet in a final choice.
    """
    plan = plan_rank(items, instructions, state, describe=describe, none=none, top_k=top_k)
    inputs = {
        "items": plan.items,
        "instructions": plan.instructions,
        "state": plan.state,
        "describe": describe,
        "none": plan.none,
        "top_k": plan.top_k,
    }
    async with ToolCall(
        "rank", model=model, timeout=timeout, backend_options={"base_url": base_url, "api_key": api_key}, inputs=inputs
    ) as call:
        if not plan.items or (len(plan.items) == 1 and plan.none is None):
            # Nothing to choose between: a single option has all the probability.
            outcome = _Round({index: 1.0 for index in plan.order}, None, [])
        else:
            outcome = await _rank_round(call, plan, plan.order, _items_per_call(plan, call.decider.limits.max_options))
        result = build_result(plan, outcome, model=call.answered_by, usage=call.usage, run_id=call.run_id)
        call.record_outputs(
            {"ranked": [entry.to_dict() for entry in result.ranked], "none": result.none, "no_fit": result.no_fit}
        )
    return result


rank = sync_twin_of(arank, "rank")

RANK = ToolDefinition(
    arank,
    name="rank",
    title="Rank a list",
    description=(
        "Ranks a whole list against a question in one decision-model call.\n\n"
        "The items become the options of one choice question, state is the context they're judged against, "
        "and instructions is the question. Each option shows the item's describe field, or the whole item "
        "when describe is absent. items is the list sorted by probability, highest first, and ranked pairs "
        "each item with its probability; both are cut to top_k. Options are shown in a shuffled order seeded "
        "from the items, so the same list ranks the same way on a rerun. none adds a 'nothing fits' option: "
        "its probability comes back as none, and no_fit is true when it beats every item. Lists over 254 "
        "items are ranked in chunks sent together whose best meet in a final choice; items that don't reach "
        "the final follow the finalists with a null probability. Needs a decision model role, decider by "
        "default.\n\n"
        "Use it to rerank search results, candidates or options against a question: one call instead of one "
        "per item, and no LLM. Keep state to what the question needs: the question and its context, not the "
        "items. For an absolute yes or no per item rather than an order, use builtin__filter."
    ),
    result=RankOutput,
    command="rank",
    route="/v1/rank",
)
