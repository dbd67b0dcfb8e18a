"""The tools' own input checks: text that UTF-8 cannot encode is refused, naming where it is, before any work."""

from __future__ import annotations

import pytest

import decirank
from decirank._jsonpath import MAX_NESTING
from decirank.errors import InvalidInputError
from decirank.testing import ScriptedBackend, use_backend

CASES = [
    (lambda: decirank.rank(["a", {"t": ["x", "b\ud800"]}], "Which?", 1), "items.1.t.1"),
    (lambda: decirank.rank(["a", "b"], "Which\udc00?", 1), "instructions"),
    (lambda: decirank.rank(["a", "b"], "Which?", 1, describe="t\ud800"), "describe"),
    (lambda: decirank.rank(["a", "b"], "Which?", 1, none="none\ud800"), "none"),
    (lambda: decirank.rerank("fl\ud800eas", ["a"]), "query"),
    (lambda: decirank.rerank("fleas", ["a", {"id": "x", "text": "b\udfff"}]), "documents.1.text"),
    (lambda: decirank.filter(["a", "b\ud83d"], "Is it?", 1), "items.1"),
    (lambda: decirank.filter(["a"], "Is it\ud800?", 1), "question"),
]


@pytest.mark.parametrize(("call", "field"), CASES, ids=[field for _, field in CASES])
def test_a_lone_surrogate_is_refused_naming_its_field_before_any_model_call(call, field):
    """rank, rerank and filter refuse a string holding a lone surrogate with InvalidInputError naming the path."""
    backend = ScriptedBackend("any")
    with use_backend(backend) as model, pytest.MonkeyPatch.context() as patch:
        # The cases name no model: the scripted one stands in for the default role.
        patch.setenv("DECIRANK_ROLE_DECIDER", model)
        with pytest.raises(InvalidInputError) as raised:
            call()
    assert raised.value.field == field
    assert "lone surrogate" in str(raised.value)
    assert backend.requests == []


def test_check_encodable_walks_keys_and_refuses_a_list_that_holds_itself():
    """Keys are checked too, and a self-referential list (infinitely deep) is refused rather than walked forever."""
    from decirank.tools._checks import check_encodable

    looped: list = ["fine"]
    looped.append(looped)
    with pytest.raises(InvalidInputError, match="at most 64 levels of nesting"):
        check_encodable(looped, "items")
    with pytest.raises(InvalidInputError) as raised:
        check_encodable({"ok": {"k\ud800": 1}}, "state")
    assert raised.value.field == "state.ok.k\\ud800"


def test_library_calls_refuse_deep_nesting_and_keys_that_are_not_strings():
    """A Python caller's tuple key or over-deep state is an InvalidInputError naming the field, not a raw error."""
    deep: object = "x"
    for _ in range(MAX_NESTING + 1):
        deep = [deep]
    with pytest.raises(InvalidInputError) as raised:
        decirank.rank(["a", "b"], "Which?", {"question": deep}, model="lexical")
    assert raised.value.field.startswith("state.question.0.0") and "at most 64 levels" in str(raised.value)
    with pytest.raises(InvalidInputError) as raised:
        decirank.filter([{("a", 1): "x"}], "Is it?", "state", model="lexical")
    assert raised.value.field == "items.0.('a', 1)" and "keys that are strings" in str(raised.value)
    with pytest.raises(InvalidInputError, match="levels of nesting"):
        decirank.rerank("q", [{"id": "x", "text": "t", "meta": deep}], model="lexical")
    shallow: object = "x"
    for _ in range(MAX_NESTING - 2):
        shallow = [shallow]
    assert decirank.rank([shallow, "b"], "Which?", {"q": shallow}, model="lexical").items
