"""filter: an absolute yes or no per item, in input order."""

from __future__ import annotations

import asyncio

import pytest

import decirank
from decirank.decisions.answers import LikelihoodAnswer
from decirank.errors import InvalidInputError
from decirank.testing import ScriptedBackend, use_backend


def yes_for(word):
    return lambda request: {
        qid: LikelihoodAnswer(0.9 if word in q.instructions else 0.2) for qid, q in request.questions.items()
    }


def test_keeps_items_at_or_above_min_confidence_in_input_order():
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
    with use_backend(ScriptedBackend(answer=yes_for("x"))) as model:
        assert decirank.filter(["x", "y"], "Q?", {}, model=model, min_confidence=0.2).to_dict()["count"] == 2
        assert decirank.filter(["x", "y"], "Q?", {}, model=model, min_confidence=0.95).to_dict()["count"] == 0


def test_bad_input():
    with pytest.raises(InvalidInputError) as caught:
        decirank.filter(["a"], "Q?", {}, model="lexical", min_confidence=-1)
    assert caught.value.field == "min_confidence"
    with pytest.raises(InvalidInputError) as caught:
        decirank.filter({"not": "a list"}, "Q?", {}, model="lexical")
    assert caught.value.field == "items"


def test_async_twin_and_empty_list():
    with use_backend(ScriptedBackend(answer=yes_for("a"))) as model:
        result = asyncio.run(decirank.afilter(["a", "b"], "Q?", {}, model=model))
        empty = decirank.filter([], "Q?", {}, model=model)
    assert result.items == ["a"]
    assert empty.to_dict()["count"] == 0
