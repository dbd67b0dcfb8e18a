"""decirank serve with labelled examples: /v1/filter and /v1/systemone take lists or stored set names."""

from __future__ import annotations

import httpx
import pytest

import decirank
from decirank.server import create_app
from decirank.stores.examples import ExampleStore
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.questions import Example
from tests.loopback import ThreadedServer


@pytest.fixture
def served():
    """A server whose model is a scripted backend, so each test sees exactly what reached the model."""
    backend = ScriptedBackend()
    with use_backend(backend) as model, ThreadedServer(create_app(model)) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            yield client, backend, url


def only_questions(backend):
    (request,) = backend.requests
    return list(request.questions.values())


def test_filter_takes_example_items_rendered_like_its_items(served):
    """/v1/filter's examples reach every item's question as Examples of item texts."""
    client, backend, _ = served
    body = {
        "items": [{"title": "cat"}, {"title": "bus"}],
        "question": "Pet?",
        "state": None,
        "describe": "title",
        "examples": [{"item": {"title": "dog"}, "answer": True}, {"state": "car", "answer": False}],
    }
    response = client.post("/v1/filter", json=body)
    assert response.status_code == 200, response.text
    expected = (Example("dog", True), Example("car", False))
    assert [q.examples for q in only_questions(backend)] == [expected, expected]


def test_filter_takes_a_stored_set_by_name_and_names_an_unknown_one(served):
    """A string is a set stored on the server; an unknown one is a 422 at examples listing the known sets."""
    client, backend, _ = served
    ExampleStore().put("pets", [{"state": "dog", "answer": True}, {"state": "car", "answer": False}])
    body = {"items": ["cat"], "question": "Pet?", "state": None, "examples": "pets"}
    assert client.post("/v1/filter", json=body).status_code == 200
    assert only_questions(backend)[0].examples == (Example("dog", True), Example("car", False))

    response = client.post("/v1/filter", json={**body, "examples": "dogs"})
    assert response.status_code == 422
    (issue,) = response.json()["detail"]
    assert issue["loc"] == ["body", "examples"]
    assert "known sets: pets" in issue["msg"]
    bad = client.post("/v1/filter", json={**body, "examples": [{"item": "dog", "answer": "yes"}]})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "examples", 0, "answer"]
    assert client.post("/v1/filter", json={**body, "examples": 3}).status_code == 422


def test_systemone_questions_take_examples_lists_and_set_names(served):
    """noul and choice questions take examples as a list or a stored set's name; they reach the model as Examples."""
    client, backend, _ = served
    ExampleStore().put("topics", [{"state": "my parrot", "answer": "pets"}, {"state": "brakes", "answer": "cars"}])
    body = {
        "model": "jev-latest",
        "state": "my hamster escaped",
        "questions": {
            "pet": {"type": "noul", "instructions": "Is it about a pet?",
                    "examples": [{"state": "my dog", "answer": True}, {"state": "my car", "answer": False}]},
            "topic": {"type": "choice", "instructions": "Which topic?", "criteria": {"pets": "animals", "cars": "cars"},
                      "examples": "topics"},
            "plain": {"type": "noul", "instructions": "Is it urgent?"},
        },
    }  # fmt: skip
    response = client.post("/v1/systemone", json=body)
    assert response.status_code == 200, response.text
    assert set(response.json()["answers"]) == {"pet", "topic", "plain"}
    pet, topic, plain = only_questions(backend)
    assert pet.examples == (Example("my dog", True), Example("my car", False))
    assert topic.examples == (Example("my parrot", "pets"), Example("brakes", "cars"))
    assert plain.examples == ()


@pytest.mark.parametrize(
    ("examples", "location"),
    [
        ([{"state": "x", "answer": "maybe"}], ["body", "questions", "topic", "examples", 0, "answer"]),
        ([{"state": "x"}], ["body", "questions", "topic", "examples", 0]),
        ("no-such-set", ["body", "questions", "topic", "examples"]),
    ],
)
def test_a_bad_systemone_example_is_a_422_naming_it(served, examples, location):
    """A key that is not an option, a misshapen example or an unknown set: 422 at the example's place."""
    client, backend, _ = served
    question = {"type": "choice", "instructions": "Which?", "criteria": {"a": "A", "b": "B"}, "examples": examples}
    response = client.post("/v1/systemone", json={"state": "s", "questions": {"topic": question}})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == location
    assert backend.requests == []


def test_one_decirank_sends_examples_to_another_and_they_arrive_as_examples(served):
    """A filter through systemone:... against decirank serve: the server lifts the block back into examples."""
    _, backend, url = served
    examples = [{"item": "dog", "answer": True}, {"item": "car", "answer": False}]
    decirank.filter(["cat"], "Pet?", None, examples=examples, model="systemone:jev-latest", base_url=url)
    (question,) = only_questions(backend)
    assert question.instructions == "Pet?\nItem: cat"
    assert question.examples == (Example("dog", True), Example("car", False))
