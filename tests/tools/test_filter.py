"""filter: an absolute yes or no per item, in input order."""

from __future__ import annotations

import asyncio

import pytest

import decirank
from decirank.errors import InvalidInputError
from decirank.stores.runlog import current_runlog
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.answers import LikelihoodAnswer


def yes_for(word):
    return lambda request: {
        qid: LikelihoodAnswer(0.9 if word in q.instructions else 0.2) for qid, q in request.questions.items()
    }


def test_keeps_items_at_or_above_min_confidence_in_input_order():
    """Kept and dropped items stay in input order, each with its probability, all asked in one call about the state."""
    items = [{"name": "cat"}, {"name": "car"}, {"name": "catalog"}]
    backend = ScriptedBackend(answer=yes_for("cat"))
    with use_backend(backend) as model:
        result = decirank.filter(items, "Is this an animal?", {"topic": "pets"}, model=model, describe="name")
    assert result.items == [{"name": "cat"}, {"name": "catalog"}]
    data = result.to_dict()
    assert data["count"] == 2 and data["dropped"] == [{"name": "car"}] and data["dropped_count"] == 1
    assert [d["probability"] for d in data["decisions"]] == [0.9, 0.2, 0.9]
    (request,) = backend.requests
    assert request.state == {"topic": "pets"}
    assert all("Is this an animal?" in q.instructions for q in request.questions.values())


def test_min_confidence_threshold_is_inclusive():
    """An item exactly at min_confidence is kept."""
    with use_backend(ScriptedBackend(answer=yes_for("x"))) as model:
        assert decirank.filter(["x", "y"], "Q?", {}, model=model, min_confidence=0.2).to_dict()["count"] == 2
        assert decirank.filter(["x", "y"], "Q?", {}, model=model, min_confidence=0.95).to_dict()["count"] == 0


def test_bad_input():
    """A bad threshold or a non-list of items is an InvalidInputError naming the field."""
    with pytest.raises(InvalidInputError) as caught:
        decirank.filter(["a"], "Q?", {}, model="lexical", min_confidence=-1)
    assert caught.value.field == "min_confidence"
    with pytest.raises(InvalidInputError) as caught:
        decirank.filter({"not": "a list"}, "Q?", {}, model="lexical")
    assert caught.value.field == "items"


def test_async_twin_and_empty_list():
    """afilter gives the same result as filter, and an empty list keeps nothing."""
    with use_backend(ScriptedBackend(answer=yes_for("a"))) as model:
        result = asyncio.run(decirank.afilter(["a", "b"], "Q?", {}, model=model))
        empty = decirank.filter([], "Q?", {}, model=model)
    assert result.items == ["a"]
    assert empty.to_dict()["count"] == 0


def test_a_bad_items_per_call_is_named_as_filter_names_it_before_any_work():
    """max_items_per_call is refused under its own name before a model is asked or a run is logged."""
    backend = ScriptedBackend()
    with use_backend(backend) as model, pytest.raises(InvalidInputError) as caught:
        decirank.filter(["a", "b"], "Q?", {}, model=model, max_items_per_call=0)
    assert caught.value.field == "max_items_per_call"
    assert backend.requests == []
    assert current_runlog().runs() == []


def test_a_state_utf8_cannot_encode_is_refused_by_field():
    with pytest.raises(InvalidInputError, match="state"):
        decirank.filter(["a", "b"], "Is it?", {"q": "\ud800"}, model="lexical")


def test_state_is_optional_for_filter_and_rank():
    """decirank.filter(items, question) asks with the empty context {}; decirank.rank(items, question) asks with
    the question itself as the context, so a query given as the question ranks as it would in the state."""
    gate, chooser = ScriptedBackend(answer=yes_for("cat")), ScriptedBackend()
    with use_backend(gate) as model:
        kept = decirank.filter(["a cat", "a car"], "Is this about pets?", model=model)
    with use_backend(chooser) as model:
        ranked = asyncio.run(decirank.arank(["a cat", "a car"], "Which one purrs?", model=model))
    assert kept.items == ["a cat"] and len(ranked.ranked) == 2
    assert [request.state for request in gate.requests + chooser.requests] == [{}, "Which one purrs?"]
