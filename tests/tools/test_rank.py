"""rank: one choice question over the whole list, with the documented rules of builtin__rank."""

from __future__ import annotations

import asyncio
import random

import pytest

import decirank
from decirank.errors import InvalidInputError, LimitExceededError, UnknownModelError
from decirank.stores.runlog import current_runlog
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.answers import ChoiceAnswer
from decirank.types.limits import ModelLimits


def position_biased(request):
    """A model that prefers whatever it is shown first, as real decision models lean to."""
    question = request.questions["rank"]
    weights = {key: 1.0 / (position + 1) for position, key in enumerate(question.options)}
    total = sum(weights.values())
    return {"rank": ChoiceAnswer({key: weight / total for key, weight in weights.items()})}


def prefers_text(word, none_weight=0.0):
    """Options containing ``word`` get most of the probability; ``none`` gets ``none_weight``."""

    def answer(request):
        options = request.questions["rank"].options
        weights = {key: (10.0 if word in text else 1.0) for key, text in options.items() if key != "none"}
        if "none" in options:
            weights["none"] = none_weight
        total = sum(weights.values())
        return {"rank": ChoiceAnswer({key: weight / total for key, weight in weights.items()})}

    return answer


def test_input_order_does_not_change_the_ranking():
    """The shuffle is seeded by the set of items, so even a position-biased model ranks two orders alike."""
    items = [f"item {n}" for n in range(40)]
    reordered = items[::-1]
    random.Random(7).shuffle(reordered)
    with use_backend(ScriptedBackend(answer=position_biased)) as model:
        first = decirank.rank(items, "Which item?", {"question": "any"}, model=model)
        second = decirank.rank(reordered, "Which item?", {"question": "any"}, model=model)
    assert first.items == second.items
    assert [entry.probability for entry in first.ranked] == [entry.probability for entry in second.ranked]
    assert first.items != items, "options must be shown shuffled, not in input order"


def test_rerun_ranks_the_same_way():
    """The same list ranks the same way every time."""
    items = [{"name": f"n{n}"} for n in range(30)]
    with use_backend(ScriptedBackend(answer=position_biased)) as model:
        runs = [decirank.rank(items, "Which?", {}, model=model).items for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


def test_option_keys_sort_in_presentation_order():
    """Option keys sort in the order options are shown, with 'none' last, since servers may sort them."""
    backend = ScriptedBackend()
    with use_backend(backend) as model:
        decirank.rank([f"x{n}" for n in range(120)], "Which?", {}, model=model, none="none of these")
    keys = list(backend.requests[0].questions["rank"].options)
    assert keys == sorted(keys)
    assert keys[-1] == "none"


def test_describe_follows_dot_paths_into_dicts_and_lists():
    """describe follows dot paths through objects and list indices to the text shown."""
    items = [
        {"meta": {"date": "2020"}, "authors": [{"name": "Ada"}]},
        {"meta": {"date": "1999"}, "authors": [{"name": "Grace"}]},
    ]
    backend = ScriptedBackend()
    with use_backend(backend) as model:
        decirank.rank(items, "Which?", {}, model=model, describe="authors.0.name")
        decirank.rank(items, "Which?", {}, model=model, describe="meta.date")
    assert sorted(backend.requests[0].questions["rank"].options.values()) == ["Ada", "Grace"]
    assert sorted(backend.requests[1].questions["rank"].options.values()) == ["1999", "2020"]


def test_whole_item_is_shown_as_canonical_json_without_describe():
    """Without describe, strings are shown as they are and other items as canonical JSON."""
    backend = ScriptedBackend()
    with use_backend(backend) as model:
        decirank.rank([{"b": 1, "a": "é"}, "plain text"], "Which?", {}, model=model)
    shown = sorted(backend.requests[0].questions["rank"].options.values())
    assert shown == ["plain text", '{"a":"é","b":1}']


def test_missing_describe_path_names_the_item():
    """An item without the describe path is an InvalidInputError naming the item."""
    with pytest.raises(InvalidInputError) as caught:
        decirank.rank([{"url": "a"}, {"title": "b"}], "Which?", {}, model="lexical", describe="url")
    assert caught.value.field == "describe"
    assert "item 1" in str(caught.value)


def test_items_sorted_by_probability_with_index_and_top_k():
    """Items come highest probability first, with their input index, cut to top_k."""
    items = ["red apple", "green pear", "blue apple pie", "a car"]
    with use_backend(ScriptedBackend(answer=prefers_text("apple"))) as model:
        result = decirank.rank(items, "Which has apples?", {}, model=model, top_k=2)
    assert result.items == ["red apple", "blue apple pie"]
    assert [entry.index for entry in result.ranked] == [0, 2]
    data = result.to_dict()
    assert set(data) >= {"items", "ranked", "none", "no_fit", "model", "usage"}
    assert len(data["items"]) == len(data["ranked"]) == 2
    assert data["ranked"][0] == {"item": "red apple", "index": 0, "probability": pytest.approx(10 / 22)}


def test_ties_keep_input_order():
    """Items with equal probability keep their input order."""
    items = ["c", "a", "b", "d"]
    with use_backend(ScriptedBackend()) as model:  # uniform answers: every item ties
        result = decirank.rank(items, "Which?", {}, model=model)
    assert result.items == items


def test_none_that_beats_every_item_sets_no_fit():
    """When 'nothing fits' beats every item, its probability is returned and no_fit is true."""
    with use_backend(ScriptedBackend(answer=prefers_text("zzz", none_weight=5.0))) as model:
        result = decirank.rank(["a", "b", "c"], "Which?", {}, model=model, none="nothing fits")
    assert result.none == pytest.approx(5.0 / 8.0)
    assert result.no_fit is True
    assert all(entry.probability < result.none for entry in result.ranked)


def test_none_that_loses_leaves_no_fit_false():
    """When an item beats 'nothing fits', no_fit is false."""
    with use_backend(ScriptedBackend(answer=prefers_text("b", none_weight=0.5))) as model:
        result = decirank.rank(["a", "b", "c"], "Which?", {}, model=model, none="nothing fits")
    assert result.no_fit is False
    assert result.items[0] == "b"
    assert 0 < result.none < result.ranked[0].probability


def test_empty_list_and_single_item_need_no_model_call():
    """An empty list or a single item without none is answered without a model call."""
    backend = ScriptedBackend()
    with use_backend(backend) as model:
        empty = decirank.rank([], "Which?", {}, model=model)
        single = decirank.rank(["only"], "Which?", {}, model=model)
        empty_with_none = decirank.rank([], "Which?", {}, model=model, none="nothing")
    assert backend.requests == []
    assert empty.items == [] and empty.ranked == [] and empty.no_fit is False
    assert single.ranked[0].probability == 1.0
    assert empty_with_none.no_fit is True and empty_with_none.none is None
    assert current_runlog().run(empty_with_none.run_id)["outputs"]["no_fit"] is True, "the run log agrees"


def test_single_item_with_none_is_asked():
    """A single item with a 'nothing fits' option is a real choice, so the model is asked."""
    backend = ScriptedBackend()
    with use_backend(backend) as model:
        result = decirank.rank(["only"], "Which?", {}, model=model, none="nothing")
    assert len(backend.requests) == 1
    assert result.none == pytest.approx(0.5)


def test_thousand_items_take_one_call_per_chunk_plus_the_final():
    """1,000 items: 4 chunks of at most 254 sent together, then one final; non-finalists get null."""
    items = [f"doc {n}" for n in range(1000)]
    backend = ScriptedBackend(answer=prefers_text("7"))
    with use_backend(backend) as model:
        result = decirank.rank(items, "Which?", {}, model=model)
    assert len(backend.requests) == 5
    chunk_sizes = [len(request.questions["rank"].options) for request in backend.requests[:4]]
    assert all(size <= 254 for size in chunk_sizes) and sum(chunk_sizes) == 1000
    finalists = [entry for entry in result.ranked if entry.probability is not None]
    eliminated = [entry for entry in result.ranked if entry.probability is None]
    assert len(finalists) == len(backend.requests[4].questions["rank"].options) <= 254
    assert len(finalists) + len(eliminated) == 1000
    assert result.ranked[: len(finalists)] == finalists, "finalists come first"
    assert sorted(entry.index for entry in result.ranked) == list(range(1000))
    assert "7" in result.items[0]


def test_long_lists_respect_the_model_option_limit_and_recurse():
    """A model that takes 5 options: chunks of 4, and rounds until the final fits."""
    backend = ScriptedBackend(answer=prefers_text("target"), limits=ModelLimits(max_options=5))
    items = [f"filler {n}" for n in range(59)] + ["the target"]
    with use_backend(backend) as model:
        result = decirank.rank(items, "Which?", {}, model=model)
    assert all(len(request.questions["rank"].options) <= 5 for request in backend.requests)
    assert len(backend.requests) > 16, "60 items in chunks of 4 need more than one round"
    assert result.items[0] == "the target"
    assert len(result.ranked) == 60


def test_bad_input_gets_typed_errors():
    """Bad items, instructions, top_k or model are typed errors naming what is wrong."""
    with pytest.raises(InvalidInputError) as caught:
        decirank.rank("not a list", "Which?", {}, model="lexical")
    assert caught.value.field == "items"
    with pytest.raises(InvalidInputError) as caught:
        decirank.rank(["a"], "  ", {}, model="lexical")
    assert caught.value.field == "instructions"
    with pytest.raises(InvalidInputError) as caught:
        decirank.rank(["a", "b"], "Which?", {}, model="lexical", top_k=0)
    assert caught.value.field == "top_k"
    with pytest.raises(UnknownModelError) as caught:
        decirank.rank(["a", "b"], "Which?", {}, model="lexicon")
    assert "lexical" in str(caught.value)


def test_lexical_backend_ranks_matching_item_first():
    """The lexical backend ranks the matching item first in one call."""
    items = ["recipes for sourdough bread", "how fleas live and breed on cats", "stock market news"]
    result = decirank.rank(items, "Which passage answers the question?", {"question": "flea life cycle"}, model="lexical")
    assert result.items[0] == items[1]
    assert result.model == "lexical:bm25"
    assert result.usage.calls == 1


def test_async_twin_gives_the_same_result():
    """arank gives the same result as rank."""
    items = [f"thing {n}" for n in range(20)]
    with use_backend(ScriptedBackend(answer=position_biased)) as model:
        sync_result = decirank.rank(items, "Which?", {"q": 1}, model=model)
        async_result = asyncio.run(decirank.arank(items, "Which?", {"q": 1}, model=model))
    assert sync_result.to_dict() | {"run_id": None} == async_result.to_dict() | {"run_id": None}


def test_a_two_option_model_ranks_a_pair_and_refuses_longer_lists():
    """A model whose choices take 2 options answers a pair in one call; longer lists get a typed error."""
    backend = ScriptedBackend(answer=prefers_text("b"), limits=ModelLimits(max_options=2))
    with use_backend(backend) as model:
        assert decirank.rank(["a", "b"], "Which?", {}, model=model).items == ["b", "a"]
        with pytest.raises(LimitExceededError, match="at least 3 options"):
            decirank.rank(["a", "b", "c"], "Which?", {}, model=model)


def test_a_state_utf8_cannot_encode_is_refused_by_field():
    with pytest.raises(InvalidInputError, match="state"):
        decirank.rank(["a", "b"], "Which one?", {"q": "\ud800"}, model="lexical")
