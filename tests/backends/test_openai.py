"""The openai backend against real /v1/decisions servers on loopback: a peer written here, and ours."""

from __future__ import annotations

import asyncio

import pytest

import decirank
from decirank.backends import create_backend
from decirank.backends.lexical import LexicalBackend
from decirank.backends.openai import OpenAIDecisionsBackend, decode_question, encode_question
from decirank.errors import AuthenticationError, InvalidAnswerError, MissingKeyError, RefusalError
from decirank.server import create_app
from decirank.types.answers import ChoiceAnswer, LikelihoodAnswer, ScoreAnswer
from decirank.types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion
from tests.loopback import Reply, ScriptedServer, ThreadedServer, decide_once


def decisions_peer(request: dict) -> dict:
    """A /v1/decisions server's answers: fleas are likely, the first choice wins, REFUSE is refused."""
    answers = []
    for question in request["questions"]:
        name, kind = question.get("name"), question["type"]
        if "REFUSE" in question["instructions"]:
            answers.append({"type": "refusal", "name": name})
        elif kind == "predicate":
            probability = 0.9 if "flea" in question["instructions"].lower() else 0.1
            answers.append({"type": "predicate", "name": name, "probability": probability})
        elif kind == "choice":
            rest = 0.3 / (len(question["choices"]) - 1)
            probabilities = [
                {"value": c["value"], "probability": 0.7 if i == 0 else rest} for i, c in enumerate(question["choices"])
            ]
            answers.append(
                {
                    "type": "choice",
                    "name": name,
                    "choice": question["choices"][0]["value"],
                    "probabilities": probabilities,
                    "confidence": 0.55,
                }
            )
        else:
            share = 1 / len(question["levels"])
            probabilities = [
                {"value": i, "label": lv["label"], "probability": share} for i, lv in enumerate(question["levels"])
            ]
            answers.append(
                {"type": "score", "name": name, "score": 1.0, "probabilities": probabilities, "confidence": 0.0}
            )
    usage = {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 123,
    }
    return {"model": request["model"], "answers": answers, "usage": usage}


QUESTIONS = {
    "fleas": LikelihoodQuestion("The note is about fleas."),
    "topic": ChoiceQuestion("Which topic fits?", {"pets": "animals and their care", "cars": "vehicles", "food": ""}),
    "urgency": ScoreQuestion("How urgent is it?", ("not urgent", "soon", "right now")),
}


def decide(backend, request):
    """One decision on a fresh event loop, closing the backend's client after it."""
    return decide_once(backend, request)


@pytest.fixture(scope="module")
def peer():
    with ScriptedServer() as server:
        yield server


def test_questions_go_as_a_named_list_and_answers_come_back_in_order(peer, monkeypatch):
    """Questions go as a list named by their ids, and answers, usage and the request id come back typed."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    url = peer.script("ordered", Reply(body=decisions_peer, headers={"x-request-id": "req_1"}))
    response = decide(
        OpenAIDecisionsBackend("gpt-6-luna", base_url=url), DecisionRequest("my dog has fleas", QUESTIONS)
    )
    (seen,) = peer.requests_to("ordered")
    assert seen.path == "/ordered/v1/decisions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.body["input"] == "my dog has fleas"
    assert [q["name"] for q in seen.body["questions"]] == ["fleas", "topic", "urgency"]
    assert seen.body["questions"][1]["choices"] == [
        {"value": "pets", "description": "animals and their care"},
        {"value": "cars", "description": "vehicles"},
        {"value": "food"},
    ]
    assert seen.body["questions"][2]["levels"] == [{"label": "not urgent"}, {"label": "soon"}, {"label": "right now"}]
    assert response.answers["fleas"] == LikelihoodAnswer(0.9)
    assert response.answers["topic"] == ChoiceAnswer({"pets": 0.7, "cars": 0.15, "food": 0.15})
    assert response.answers["urgency"] == ScoreAnswer((1 / 3, 1 / 3, 1 / 3))
    assert (response.usage.input_tokens, response.usage.cached_tokens, response.usage.output_tokens) == (120, 100, 3)
    assert response.request_id == "req_1" and response.model == "openai:gpt-6-luna"


def test_a_structured_state_is_sent_as_json_text_and_outcomes_join_the_predicate(peer):
    """A non-string state is sent as canonical JSON, and a predicate carries its outcome texts in its instructions."""
    url = peer.script("state", Reply(body=decisions_peer))
    question = LikelihoodQuestion("It is urgent.", true="needs help today", false="can wait")
    decide(OpenAIDecisionsBackend("m", base_url=url), DecisionRequest({"b": 1, "a": "x"}, {"q": question}))
    (seen,) = peer.requests_to("state")
    assert seen.body["input"] == '{"a":"x","b":1}'
    assert seen.body["questions"][0]["instructions"] == "It is urgent.\nTrue: needs help today\nFalse: can wait"


def test_a_refused_question_is_a_refusal_error_naming_it(peer):
    """A refusal answer becomes a RefusalError naming the question and the request id."""
    url = peer.script("refusal", Reply(body=decisions_peer, headers={"x-request-id": "req_r"}))
    request = DecisionRequest("s", {"ok": LikelihoodQuestion("fleas?"), "no": LikelihoodQuestion("REFUSE this")})
    with pytest.raises(RefusalError) as caught:
        decide(OpenAIDecisionsBackend("m", base_url=url), request)
    assert caught.value.question_id == "no" and caught.value.request_id == "req_r"


def test_answers_for_questions_not_asked_are_invalid(peer):
    """An answer naming a question that was not asked is an InvalidAnswerError."""
    stray = Reply(
        body=lambda r: {**decisions_peer(r), "answers": [{"type": "predicate", "name": "other", "probability": 0.5}]}
    )
    url = peer.script("stray", stray)
    with pytest.raises(InvalidAnswerError, match="no question asked"):
        decide(OpenAIDecisionsBackend("m", base_url=url), DecisionRequest("s", {"q": LikelihoodQuestion("x")}))


def test_openai_itself_needs_its_key(monkeypatch):
    """The OpenAI host needs a key, and the error names OPENAI_API_KEY."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        create_backend("openai")


def test_questions_survive_the_wire_both_ways():
    """Encoding then decoding a question gives it back, a choice without a description showing its value."""
    for qid, question in QUESTIONS.items():
        decoded = decode_question(encode_question(question, qid), f"questions.{qid}")
        if isinstance(question, ChoiceQuestion):
            # A choice without a description is shown by its value.
            assert dict(decoded.options) == {**question.options, "food": "food"}
        else:
            assert decoded == question


# --- against decirank serve's /v1/decisions ------------------------------------------------


@pytest.fixture
def our_server():
    with ThreadedServer(create_app("lexical", api_key="server-key")) as url:
        yield url


def test_our_server_is_a_real_decisions_peer(our_server):
    """decirank serve's /v1/decisions answers as the model it serves would directly."""
    request = DecisionRequest("my dog has fleas", QUESTIONS)
    over_the_wire = decide(OpenAIDecisionsBackend("lexical", base_url=our_server, api_key="server-key"), request)
    direct = asyncio.run(
        LexicalBackend().decide(
            DecisionRequest(
                "my dog has fleas",
                {
                    **QUESTIONS,
                    "topic": ChoiceQuestion(
                        "Which topic fits?", {"pets": "animals and their care", "cars": "vehicles", "food": "food"}
                    ),
                },
            )
        )
    )
    assert dict(over_the_wire.answers) == dict(direct.answers)


def test_the_tools_run_through_our_decisions_endpoint(our_server, monkeypatch):
    """rerank through our /v1/decisions gives the same order and scores as the model run in process."""
    monkeypatch.setenv("OPENAI_API_KEY", "server-key")
    documents = ["bread baking", "flea treatment for dogs", "a cat with fleas"]
    remote = decirank.rerank("fleas on my cat", documents, model="openai:lexical", base_url=our_server)
    local = decirank.rerank("fleas on my cat", documents, model="lexical")
    assert [r.id for r in remote.results] == [r.id for r in local.results]
    assert [r.relevance_score for r in remote.results] == [r.relevance_score for r in local.results]


def test_a_wrong_key_is_refused_by_our_server(our_server):
    """Our server refuses a wrong key with a 401 that carries a request id."""
    backend = OpenAIDecisionsBackend("lexical", base_url=our_server, api_key="wrong")
    with pytest.raises(AuthenticationError) as caught:
        decide(backend, DecisionRequest("s", {"q": LikelihoodQuestion("x")}))
    assert caught.value.status == 401 and caught.value.request_id
