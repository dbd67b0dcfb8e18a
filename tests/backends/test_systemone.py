"""The systemone backends against real servers on loopback: ours, sparrow-decider's, and a scripted one."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

import pytest

import decirank
from decirank.backends import create_backend
from decirank.backends.lexical import LexicalBackend
from decirank.backends.systemone import (
    OpenRouterBackend,
    SystemOneBackend,
    TypeSafeBackend,
    decode_answer,
    decode_question,
    encode_answer,
    encode_question,
)
from decirank.errors import (
    AuthenticationError,
    InvalidAnswerError,
    InvalidInputError,
    MissingKeyError,
    ModelConnectionError,
    ModelError,
    ModelRequestInvalidError,
    ModelTimeoutError,
    OverloadedError,
    RateLimitError,
    ServerError,
    TooLargeError,
)
from decirank.server import create_app
from decirank.stores.runlog import current_runlog
from decirank.types.answers import ChoiceAnswer, LikelihoodAnswer, ScoreAnswer
from decirank.types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion
from tests.loopback import (
    Reply,
    ScriptedServer,
    ThreadedServer,
    answers,
    decide_once,
    free_port,
    subprocess_server,
    uniform,
)

QUESTIONS = {
    "fleas": LikelihoodQuestion("The note is about fleas.", true="it is about fleas", false="it is not"),
    "topic": ChoiceQuestion("Which topic fits?", {"pets": "animals and their care", "cars": "vehicles"}),
    "urgency": ScoreQuestion("How urgent is it?", ("not urgent", "soon", "right now")),
}
REQUEST = DecisionRequest({"note": "my dog has fleas, help"}, QUESTIONS)


def decide(backend, request=REQUEST):
    """One decision on a fresh event loop, closing the backend's client after it."""
    return decide_once(backend, request)


@pytest.fixture(scope="module")
def scripted():
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def our_server():
    with ThreadedServer(create_app("lexical")) as url:
        yield url


# --- the codec ---------------------------------------------------------------------------


def test_questions_survive_the_wire_both_ways():
    """Encoding then decoding a question gives it back; optional criteria are left out when empty."""
    for qid, question in QUESTIONS.items():
        assert decode_question(encode_question(question), f"questions.{qid}") == question
    assert encode_question(LikelihoodQuestion("x")) == {"type": "noul", "instructions": "x"}
    assert encode_question(QUESTIONS["urgency"])["criteria"] == ["not urgent", "soon", "right now"]


def test_answers_survive_the_wire_both_ways():
    """Encoding then decoding an answer gives it back; a score carries its legend and expected level."""
    given = {
        "fleas": LikelihoodAnswer(0.8),
        "topic": ChoiceAnswer({"pets": 0.9, "cars": 0.1}),
        "urgency": ScoreAnswer((0.2, 0.3, 0.5)),
    }
    for qid, answer in given.items():
        wire = encode_answer(answer, QUESTIONS[qid])
        assert decode_answer(wire, QUESTIONS[qid], qid) == answer
    score = encode_answer(given["urgency"], QUESTIONS["urgency"])
    assert score["legend"] == {"0": "not urgent", "1": "soon", "2": "right now"}
    assert score["score"] == pytest.approx(1.3)
    assert encode_answer(given["topic"], QUESTIONS["topic"])["confidence"] == pytest.approx(0.8)


def test_score_probabilities_may_be_keyed_by_level_text():
    """A score answer keyed by level text is read in level order."""
    wire = {"type": "score", "probabilities": {"soon": 0.5, "not urgent": 0.25, "right now": 0.25}}
    assert decode_answer(wire, QUESTIONS["urgency"], "q").probabilities == (0.25, 0.5, 0.25)


def test_a_bad_wire_question_names_its_field():
    """A malformed wire question is an InvalidInputError naming its field as the wire spells it."""
    with pytest.raises(InvalidInputError) as caught:
        decode_question({"type": "choice", "instructions": "pick", "criteria": {"only": "one"}}, "questions.q1")
    assert caught.value.field == "questions.q1.criteria"
    with pytest.raises(InvalidInputError) as caught:
        decode_question({"type": "box", "instructions": "x"}, "questions.q2")
    assert caught.value.field == "questions.q2.type"


# --- against our own server --------------------------------------------------------------


def test_our_server_answers_as_the_model_it_serves(our_server):
    """decirank serve's /v1/systemone answers, counts and prices as the model it serves does directly."""
    over_the_wire = decide(SystemOneBackend("lexical", base_url=our_server))
    direct = asyncio.run(LexicalBackend().decide(REQUEST))
    assert over_the_wire.model == "systemone:lexical"
    assert dict(over_the_wire.answers) == dict(direct.answers)
    assert over_the_wire.usage.input_tokens == direct.usage.input_tokens
    assert over_the_wire.usage.cost == 0.0, "the server reports the cost of what it ran"
    assert over_the_wire.request_id, "our server gives every response a request id"


def test_tools_rank_the_same_through_our_server(our_server):
    """rank through our /v1/systemone gives the same order and probabilities as the model run in process."""
    items = ["bread baking", "flea treatment for dogs", "stock markets", "cat fleas and ticks"]
    remote = decirank.rank(
        items, "Which is about fleas?", {"q": "fleas"}, model="systemone:lexical", base_url=our_server
    )
    local = decirank.rank(items, "Which is about fleas?", {"q": "fleas"}, model="lexical")
    assert remote.items == local.items
    assert [r.probability for r in remote.ranked] == [r.probability for r in local.ranked]
    assert remote.model == "systemone:lexical"


# --- against sparrow-decider, a third-party System One server ------------------------------


def sparrow_command(port: int) -> list[str]:
    installed = shutil.which("sparrow-decider", path=str(Path(sys.executable).parent))
    command = [installed] if installed else [sys.executable, "-m", "sparrow_decider.cli"]
    return [*command, "serve", "--port", str(port)]


@pytest.fixture(scope="module")
def sparrow():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with subprocess_server(sparrow_command(port), url):
        yield url


def test_sparrow_decider_answers_every_kind_of_question(sparrow):
    """A third-party System One server answers every question type in a shape we read."""
    response = decide(SystemOneBackend("sparrow-nano-general-v1.1", base_url=sparrow))
    assert set(response.answers) == set(QUESTIONS)
    assert 0.0 <= response.answers["fleas"].probability <= 1.0
    assert set(response.answers["topic"].probabilities) == {"pets", "cars"}
    assert len(response.answers["urgency"].probabilities) == 3
    assert response.usage.cost is None, "sparrow reports no cost and no price is configured"


def test_the_tools_run_on_sparrow_decider(sparrow):
    """rank and rerank run end to end on a third-party System One server."""
    items = ["bread baking", "flea treatment for dogs", "stock markets"]
    ranked = decirank.rank(items, "Which is about fleas?", "fleas", model="systemone:sparrow", base_url=sparrow)
    assert sorted(r.index for r in ranked.ranked) == [0, 1, 2]
    assert sum(r.probability for r in ranked.ranked) == pytest.approx(1.0, abs=0.01)
    reranked = decirank.rerank("fleas", items, model="systemone:sparrow", base_url=sparrow)
    assert [r.rank for r in reranked.results] == [1, 2, 3]


# --- every way a server fails -------------------------------------------------------------

GOOD = Reply(body=answers(uniform), headers={"x-request-id": "req-good"})


def failure(scripted, scenario, *replies, **options):
    """The error a backend raises against ``replies``, and the requests the server saw."""
    backend = SystemOneBackend("m", base_url=scripted.script(scenario, *replies), **options)
    with pytest.raises(ModelError) as caught:
        decide(backend)
    return caught.value, scripted.requests_to(scenario)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_an_authentication_error_with_the_request_id(scripted, status):
    """401 and 403 are AuthenticationErrors carrying the server's message and request id, not retried."""
    error, seen = failure(
        scripted, f"auth{status}", Reply(status, {"error": {"message": "bad key"}}, {"x-request-id": "req-7"})
    )
    assert isinstance(error, AuthenticationError)
    assert (error.status, error.request_id) == (status, "req-7")
    assert "bad key" in str(error) and "req-7" in str(error)
    assert len(seen) == 1, "an authentication error is not retried"


def test_too_large_by_status_or_by_body(scripted):
    """A 413, or a body that says max_tokens_exceeded, is a TooLargeError, not retried."""
    error, _ = failure(scripted, "large413", Reply(413, {"error": "payload too large"}))
    assert isinstance(error, TooLargeError)
    error, seen = failure(
        scripted,
        "largebody",
        Reply(400, {"detail": {"error_type": "max_tokens_exceeded", "message": "too long"}}, {"request-id": "r-9"}),
    )
    assert isinstance(error, TooLargeError) and error.request_id == "r-9"
    assert len(seen) == 1


def test_a_422_is_invalid_with_its_detail_and_is_not_retried(scripted):
    """A 422 is a fatal ModelRequestInvalidError whose message reads its detail list."""
    detail = [{"loc": ["body", "questions", "q", "criteria"], "msg": "too few", "type": "value_error"}]
    error, seen = failure(scripted, "invalid", Reply(422, {"detail": detail}))
    assert isinstance(error, ModelRequestInvalidError) and not error.retriable
    assert error.detail == detail
    assert "questions.q.criteria: too few" in str(error)
    assert len(seen) == 1


def test_a_rate_limit_waits_as_long_as_retry_after_ms_says(scripted):
    """After a 429 the retry waits at least retry-after-ms, then succeeds."""
    url = scripted.script("limited", Reply(429, {"error": "slow down"}, {"retry-after-ms": "150"}), GOOD)
    response = decide(SystemOneBackend("m", base_url=url))
    first, second = scripted.requests_to("limited")
    assert second.at - first.at >= 0.15
    assert response.request_id == "req-good"


def test_retry_after_in_seconds_is_honoured(scripted):
    """After a 429 the retry waits at least Retry-After seconds."""
    url = scripted.script("limited-s", Reply(429, {}, {"retry-after": "1"}), GOOD)
    decide(SystemOneBackend("m", base_url=url))
    first, second = scripted.requests_to("limited-s")
    assert second.at - first.at >= 1.0


def test_rate_limits_are_retried_twice_by_default_then_raised(scripted):
    """A lasting 429 is retried twice, then raised with the server's retry_after."""
    error, seen = failure(scripted, "always429", Reply(429, {}, {"retry-after-ms": "10"}))
    assert isinstance(error, RateLimitError) and error.retry_after == pytest.approx(0.01)
    assert len(seen) == 3


def test_a_tool_call_retries_a_rate_limit_in_one_place_only(scripted):
    """The transport's retries are all a 429 gets: failover does not ask the same model again."""
    url = scripted.script("limited-tool", Reply(429, {}, {"retry-after-ms": "10"}))
    with pytest.raises(RateLimitError):
        decirank.rerank("fleas", ["a flea"], model="systemone:m", base_url=url, timeout=5)
    assert len(scripted.requests_to("limited-tool")) == 3


def test_the_number_of_retries_can_be_set(scripted):
    """max_retries=0 sends the request once and raises the ServerError."""
    error, seen = failure(scripted, "always503", Reply(503, {"error": "down"}), max_retries=0)
    assert isinstance(error, ServerError) and error.status == 503
    assert len(seen) == 1


def test_a_server_error_is_retried_with_backoff(scripted):
    """A 500 is retried after the first backoff delay."""
    url = scripted.script("flaky", Reply(500, {"error": "oops"}), GOOD)
    decide(SystemOneBackend("m", base_url=url))
    first, second = scripted.requests_to("flaky")
    assert second.at - first.at >= 0.5 * 0.75, "the first backoff is 0.5 s less at most a quarter of jitter"


def test_an_overloaded_server_is_an_overloaded_error(scripted):
    """A lasting 529 is retried, then raised as an OverloadedError."""
    error, seen = failure(scripted, "overloaded", Reply(529, {"error": "overloaded"}, {"retry-after": "0"}))
    assert isinstance(error, OverloadedError) and error.status == 529
    assert len(seen) == 3


def test_no_retry_waits_past_the_callers_budget(scripted):
    """A retry whose wait would end past the caller's budget is not started; the error is raised at once."""
    url = scripted.script("budget", Reply(429, {"error": "later"}, {"retry-after": "30"}))
    started = time.monotonic()
    with pytest.raises(RateLimitError) as caught:
        decirank.rerank("fleas", ["a flea"], model="systemone:m", base_url=url, timeout=2)
    assert time.monotonic() - started < 1.0, "a 30 s wait does not fit a 2 s budget, so none is started"
    assert caught.value.retry_after == 30
    assert len(scripted.requests_to("budget")) == 1


def test_a_slow_server_is_a_timeout(scripted):
    """A server slower than the timeout gives a ModelTimeoutError."""
    error, _ = failure(scripted, "slow", Reply(delay=1.0, body=answers(uniform)), timeout=0.2)
    assert isinstance(error, ModelTimeoutError)


def test_a_dropped_connection_is_a_connection_error(scripted):
    """A connection closed without a response is a ModelConnectionError."""
    error, _ = failure(scripted, "dropped", Reply(drop=True))
    assert isinstance(error, ModelConnectionError)


def test_nothing_listening_is_a_connection_error():
    """A port nobody listens on is a ModelConnectionError that says it cannot reach the URL."""
    backend = SystemOneBackend("m", base_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ModelConnectionError) as caught:
        decide(backend)
    assert "cannot reach" in str(caught.value)


@pytest.mark.parametrize(
    ("scenario", "body", "message"),
    [
        ("not-json", b"<html>proxy error</html>", "not JSON"),
        ("no-answers", {"model": "m", "usage": {}}, "no answers object"),
        ("wrong-type", answers(lambda qid, q: {"type": "noul", "noul": 0.5}), "answer to a choice question"),
        ("not-a-number", answers(lambda qid, q: {**uniform(qid, q), "noul": "high"}), "expected a probability"),
    ],
)
def test_malformed_answers_are_invalid_answer_errors(scripted, scenario, body, message):
    """A reply that is not JSON, lacks answers, or has wrong types is an InvalidAnswerError naming the request id."""
    backend = SystemOneBackend(
        "m", base_url=scripted.script(scenario, Reply(body=body, headers={"x-request-id": "r1"}))
    )
    with pytest.raises(InvalidAnswerError) as caught:
        decide(backend)
    assert message in str(caught.value) and "r1" in str(caught.value)


@pytest.mark.parametrize(
    "broken",
    [
        lambda qid, q: {"type": "noul", "noul": 1.5},  # outside [0, 1]
        lambda qid, q: {"type": "noul"},  # no probability
    ],
)
def test_no_tool_scores_a_broken_answer(scripted, broken):
    """An answer outside [0, 1] or without a probability fails the tool call instead of being scored."""
    url = scripted.script("broken", Reply(body=answers(broken)))
    with pytest.raises(InvalidAnswerError):
        decirank.rerank("fleas", ["a flea", "a car"], model="systemone:m", base_url=url)


def test_a_missing_answer_fails_the_tool_call(scripted):
    """A reply that leaves a question unanswered fails the tool call."""
    url = scripted.script("missing", Reply(body=lambda request: {"answers": {}, "usage": {}}))
    with pytest.raises(InvalidAnswerError, match="missing"):
        decirank.rerank("fleas", ["a flea"], model="systemone:m", base_url=url)


# --- the request, keys, presets, prices and limits -----------------------------------------


def test_the_request_carries_model_state_questions_and_key(scripted, monkeypatch):
    """The request goes to /v1/systemone with the model, the state as given, the encoded questions and the key."""
    monkeypatch.setenv("SYSTEMONE_API_KEY", "sk-local")
    url = scripted.script("shape", GOOD)
    decide(SystemOneBackend("jev-latest", base_url=url))
    (seen,) = scripted.requests_to("shape")
    assert seen.path == "/shape/v1/systemone"
    assert seen.headers["authorization"] == "Bearer sk-local"
    assert seen.body["model"] == "jev-latest"
    assert seen.body["state"] == {"note": "my dog has fleas, help"}
    assert seen.body["questions"]["fleas"] == {
        "type": "noul",
        "instructions": "The note is about fleas.",
        "criteria": {"true": "it is about fleas", "false": "it is not"},
    }


def test_a_hosted_preset_without_its_key_names_the_variable(monkeypatch):
    """A hosted preset without its key is a MissingKeyError naming the variable to set."""
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    with pytest.raises(MissingKeyError) as caught:
        create_backend("typesafe")
    assert caught.value.variable == "TYPESAFE_API_KEY"
    assert "TYPESAFE_API_KEY" in str(caught.value)


def test_presets_know_their_hosts_and_speak_the_same_format(scripted, monkeypatch):
    """Presets carry host, key and limits; at one's own base URL they need no key; a reported cost is taken."""
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-key")
    typesafe = TypeSafeBackend("jev-latest")
    assert (typesafe.name, typesafe.base_url) == ("typesafe:jev-latest", "https://api.typesafe.ai")
    assert typesafe.limits.max_options == 255
    # Pointed at a proxy of one's own, the preset needs no key and speaks System One there.
    monkeypatch.delenv("TYPESAFE_API_KEY")
    decide(TypeSafeBackend("jev-latest", base_url=scripted.script("typesafe-proxy", GOOD)))
    (seen,) = scripted.requests_to("typesafe-proxy")
    assert (seen.path, seen.body["model"]) == ("/typesafe-proxy/v1/systemone", "jev-latest")
    assert "authorization" not in seen.headers
    # OpenRouter's base URL is the endpoint itself.
    url = scripted.script(
        "openrouter",
        Reply(body=lambda r: {**answers(uniform)(r), "usage": {"input_tokens": 5, "output_tokens": 1, "cost": 0.0042}}),
    )
    response = decide(OpenRouterBackend("typesafe/jev-latest", base_url=url))
    assert scripted.requests_to("openrouter")[0].path == "/openrouter"
    assert response.usage.cost == pytest.approx(0.0042), "the server's cost is taken as it is"


def test_self_hosted_presets_cost_nothing_and_listen_locally():
    """Ollama and vLLM default to local ports and cost nothing."""
    assert create_backend("ollama:llama-decider").base_url == "http://127.0.0.1:11434"
    assert create_backend("vllm").price.cost(1000, 1000) == 0.0


def test_config_prices_and_limits_override_the_builtins(scripted, isolated_user_dir):
    """The config file's prices and limits for a model replace the built-in ones."""
    isolated_user_dir.mkdir(parents=True, exist_ok=True)
    (isolated_user_dir / "config.toml").write_text(
        '[prices."systemone:priced"]\ninput = 2.0\noutput = 10.0\n\n'
        '[limits."systemone:priced"]\nmax_options = 208\nmax_questions = 2\n'
    )
    url = scripted.script("priced", GOOD)
    backend = SystemOneBackend("priced", base_url=url)
    assert (backend.limits.max_options, backend.limits.max_questions) == (208, 2)
    response = decide(backend, DecisionRequest("s", {"a": LikelihoodQuestion("x"), "b": LikelihoodQuestion("y")}))
    assert response.usage.cost == pytest.approx((7 * 2.0 + 1 * 10.0) / 1_000_000)


def test_a_declared_limit_splits_the_tools_work(scripted, isolated_user_dir):
    """A configured option limit makes rank split a long list into calls that fit it."""
    isolated_user_dir.mkdir(parents=True, exist_ok=True)
    (isolated_user_dir / "config.toml").write_text('[limits."systemone:small"]\nmax_options = 208\n')
    url = scripted.script("small", Reply(body=answers(uniform)))
    result = decirank.rank([f"item {n}" for n in range(230)], "Which?", "s", model="systemone:small", base_url=url)
    assert len(result.ranked) == 230
    sizes = [len(q["criteria"]) for r in scripted.requests_to("small") for q in r.body["questions"].values()]
    assert max(sizes) <= 208 and len(sizes) > 1


# --- failover across servers, inside one budget --------------------------------------------


def write_config(home, text):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_a_dead_server_fails_over_to_a_live_one(our_server, isolated_user_dir):
    """A role fails over from an unreachable server to the next model, and the run log records both attempts."""
    dead = f"http://127.0.0.1:{free_port()}"
    write_config(
        isolated_user_dir,
        f"""
[roles.decider]
models = ["vllm:gone", "systemone:lexical"]

[providers.vllm]
base_url = "{dead}"

[providers.systemone]
base_url = "{our_server}"
""",
    )
    result = decirank.rerank("fleas", ["a flea", "a car"], timeout=5)
    assert result.model == "systemone:lexical"
    attempts = current_runlog().run(result.run_id)["children"]
    assert [(a["model"], a["status"]) for a in attempts] == [("vllm:gone", "failed"), ("systemone:lexical", "success")]
    assert attempts[0]["error_type"] == "ModelConnectionError"


def test_a_hung_server_costs_only_its_own_timeout_of_the_budget(scripted, our_server, isolated_user_dir):
    """A hung server costs only its own timeout, leaving the budget to the next model."""
    hung = scripted.script("hung", Reply(delay=3.0, body=answers(uniform)))
    write_config(
        isolated_user_dir,
        f"""
[roles.decider]
models = ["vllm:hung", "systemone:lexical"]

[providers.vllm]
base_url = "{hung}"
timeout = 0.3

[providers.systemone]
base_url = "{our_server}"
""",
    )
    started = time.monotonic()
    result = decirank.rank(["a flea", "a car"], "Which is about fleas?", "fleas", timeout=3)
    assert result.model == "systemone:lexical"
    assert time.monotonic() - started < 2.0
