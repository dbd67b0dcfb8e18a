"""Failover across a role's models, rule by rule, with every attempt visible in the run log."""

from __future__ import annotations

import asyncio
import time

import pytest

import decirank
from decirank.decisions.failover import MAX_RATE_LIMIT_RETRIES, Failover, FailoverWarning, Retry
from decirank.decisions.toolcall import ToolCall
from decirank.errors import (
    AllModelsFailedError,
    AuthenticationError,
    InvalidAnswerError,
    MissingKeyError,
    ModelConnectionError,
    ModelRequestInvalidError,
    ModelTimeoutError,
    OverloadedError,
    RateLimitError,
    ServerError,
    TooLargeError,
)
from decirank.types.answers import LikelihoodAnswer, Usage
from decirank.types.limits import ModelLimits
from decirank.types.questions import DecisionRequest, LikelihoodQuestion

from .conftest import Alpha, Beta, attempts, fails_first, latest_run


@pytest.fixture
def role(monkeypatch):
    """Name a role's chain through its environment variable; returns the role's name."""

    def chain(*models: str) -> str:
        monkeypatch.setenv("DECIRANK_ROLE_CHAIN", ",".join(models))
        return "chain"

    return chain


def rerank_two(model: str, **options):
    return decirank.rerank("fleas", ["a dog with fleas", "a cat"], model=model, **options)


def test_a_rate_limit_retries_the_same_model_after_retry_after(use_models, role):
    """A 429 retries the same model after the retry_after it gave, and each try is its own attempt."""
    limited = Alpha("one", answer=fails_first(2, RateLimitError("slow down", retry_after=0.05)))
    fallback = Beta("one")
    use_models(limited, fallback)
    started = time.perf_counter()
    result = rerank_two(role("alpha:one", "beta:one"))
    assert time.perf_counter() - started >= 0.1, "both waits of retry_after were honoured"
    assert result.model == "alpha:one" and not fallback.requests
    assert attempts(latest_run()) == [
        ("alpha:one", "failed", "RateLimitError"),
        ("alpha:one", "failed", "RateLimitError"),
        ("alpha:one", "success", None),
    ]
    assert [child["attempt"] for child in latest_run()["children"]] == [1, 2, 3]


def test_rate_limit_retries_are_bounded_then_the_next_model_answers(use_models, role):
    """After MAX_RATE_LIMIT_RETRIES retries of a rate-limited model, the next model answers."""
    use_models(Alpha("one", answer=fails_first(99, RateLimitError("slow down", retry_after=0.01))), Beta("one"))
    result = rerank_two(role("alpha:one", "beta:one"))
    assert result.model == "beta:one"
    tried = attempts(latest_run())
    assert tried == [("alpha:one", "failed", "RateLimitError")] * (1 + MAX_RATE_LIMIT_RETRIES) + [
        ("beta:one", "success", None)
    ]


def test_a_retry_after_past_the_budget_moves_on_at_once(use_models, role):
    """A retry_after longer than the budget left is not waited for: the next model is tried at once."""
    use_models(Alpha("one", answer=fails_first(99, RateLimitError("slow down", retry_after=5))), Beta("one"))
    started = time.perf_counter()
    result = rerank_two(role("alpha:one", "beta:one"), timeout=1)
    assert time.perf_counter() - started < 0.5
    assert result.model == "beta:one"
    assert attempts(latest_run()) == [("alpha:one", "failed", "RateLimitError"), ("beta:one", "success", None)]


@pytest.mark.parametrize(
    "error",
    [
        ModelConnectionError("connection refused"),
        ModelTimeoutError("read timed out"),
        ServerError("internal error", status=500),
        OverloadedError("overloaded", status=529),
    ],
    ids=lambda error: type(error).__name__,
)
def test_network_timeout_server_and_overload_errors_go_to_the_next_model(use_models, role, error):
    """Connection, timeout, 5xx and overload errors move to the next model, and the run log keeps the error."""
    use_models(Alpha("one", error=error), Beta("one"))
    result = rerank_two(role("alpha:one", "beta:one"))
    assert result.model == "beta:one"
    run = latest_run()
    assert attempts(run) == [("alpha:one", "failed", type(error).__name__), ("beta:one", "success", None)]
    assert str(error) in run["children"][0]["error"]
    assert run["status"] == "success" and run["model"] == "beta:one"


def test_an_authentication_error_skips_every_model_of_that_provider(use_models, role):
    """A refused key skips the provider's other models and goes to the next provider."""
    same_provider = Alpha("two")
    use_models(Alpha("one", error=AuthenticationError("bad key", status=401)), same_provider, Beta("one"))
    result = rerank_two(role("alpha:one", "alpha:two", "beta:one"))
    assert result.model == "beta:one"
    assert not same_provider.requests, "a key the provider refused is not tried on its other models"
    assert attempts(latest_run()) == [("alpha:one", "failed", "AuthenticationError"), ("beta:one", "success", None)]


def test_a_link_without_its_api_key_is_skipped_with_a_warning_and_a_failed_attempt(use_models, role, monkeypatch):
    """A provider whose key is not set cannot be asked: each decision skips it (and its provider's other
    models), the run log shows the skip as a failed attempt naming the variable, and a FailoverWarning says so."""
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    (beta,) = use_models(Beta("one"))
    chain = role("typesafe:jev-latest", "typesafe:other", beta)
    with pytest.warns(FailoverWarning, match=r"typesafe:jev-latest skipped \(MissingKeyError: .*TYPESAFE_API_KEY"):
        result = rerank_two(chain)
    assert result.model == "beta:one"
    children = latest_run()["children"]
    assert [(c["model"], c["status"], c["error_type"], c["decision"]) for c in children] == [
        ("typesafe:jev-latest", "failed", "MissingKeyError", 1),
        ("beta:one", "success", None, 1),
    ]
    assert "TYPESAFE_API_KEY" in children[0]["error"]


def test_a_chain_whose_every_link_lacks_its_key_is_that_error(role, monkeypatch):
    """With no link usable there is nothing to fall back to: the first link's missing key is the error."""
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="TYPESAFE_API_KEY"):
        rerank_two(role("typesafe:jev-latest", "typesafe:other"))


def test_a_dead_model_is_a_failover_warning_too(use_models, role):
    """Moving past a model that failed is said as a FailoverWarning naming both models and the error."""
    use_models(Alpha("one", error=ServerError("down", status=503)), Beta("one"))
    with pytest.warns(FailoverWarning, match=r"alpha:one failed \(ServerError: .*down.*\); trying beta:one"):
        rerank_two(role("alpha:one", "beta:one"))


def test_a_validation_error_is_fatal(use_models, role):
    """A 422 is raised as it is, without trying any other model."""
    fallback = Beta("one")
    use_models(Alpha("one", error=ModelRequestInvalidError("bad request", status=422)), fallback)
    with pytest.raises(ModelRequestInvalidError):
        rerank_two(role("alpha:one", "beta:one"))
    assert not fallback.requests
    run = latest_run()
    assert attempts(run) == [("alpha:one", "failed", "ModelRequestInvalidError")]
    assert (run["status"], run["error_type"]) == ("failed", "ModelRequestInvalidError")


def test_a_too_large_error_goes_only_to_models_with_a_larger_context(use_models, role):
    """A too-large error skips models whose context is smaller or undeclared."""
    small = Alpha("small", error=TooLargeError("max_tokens_exceeded"), limits=ModelLimits(context_tokens=1000))
    smaller = Alpha("smaller", limits=ModelLimits(context_tokens=800))
    undeclared = Beta("undeclared")
    large = Beta("large", limits=ModelLimits(context_tokens=4000))
    use_models(small, smaller, undeclared, large)
    result = rerank_two(role("alpha:small", "alpha:smaller", "beta:undeclared", "beta:large"))
    assert result.model == "beta:large"
    assert not smaller.requests and not undeclared.requests
    assert attempts(latest_run()) == [("alpha:small", "failed", "TooLargeError"), ("beta:large", "success", None)]


def test_a_request_over_a_models_declared_limits_skips_it_unsent(use_models, role):
    """A request over a model's declared limits is never sent to it; the next model answers."""
    narrow = Alpha("narrow", limits=ModelLimits(max_questions=1))
    use_models(narrow, Beta("wide"))
    request = DecisionRequest("state", {"a": LikelihoodQuestion("one?"), "b": LikelihoodQuestion("two?")})

    async def ask_once():
        async with ToolCall("rerank", model=role("alpha:narrow", "beta:wide")) as call:
            return await call.ask(request)

    response = asyncio.run(ask_once())
    assert response.model == "beta:wide"
    assert not narrow.requests, "a request over the limits is never sent"
    assert attempts(latest_run()) == [("alpha:narrow", "failed", "LimitExceededError"), ("beta:wide", "success", None)]


def test_an_invalid_answer_is_a_model_failure_and_its_usage_still_counts(use_models, role):
    """An out-of-range answer fails over, is kept in the log, and its usage still rolls up to the run."""
    out_of_range = Alpha(
        "one",
        answer=lambda request: {qid: LikelihoodAnswer(1.5) for qid in request.questions},
        usage=Usage(input_tokens=7, output_tokens=2, cost=0.5, calls=1),
    )
    use_models(out_of_range, Beta("one", usage=Usage(input_tokens=3, output_tokens=1, cost=0.25, calls=1)))
    result = rerank_two(role("alpha:one", "beta:one"))
    assert result.model == "beta:one"
    assert all(0 <= r.relevance_score <= 1 for r in result.results), "the broken answer was not used"
    assert (result.usage.input_tokens, result.usage.cost, result.usage.calls) == (10, 0.75, 2)
    run = latest_run()
    assert attempts(run) == [("alpha:one", "failed", "InvalidAnswerError"), ("beta:one", "success", None)]
    assert run["children"][0]["answers"]["0"]["probability"] == 1.5, "the rejected answers are kept for debugging"
    assert (run["input_tokens"], run["cost"]) == (10, 0.75), "the failed call's usage rolls up to the run"


def test_when_every_model_fails_the_error_carries_each_attempt(use_models, role):
    """When every model fails, AllModelsFailedError carries each model's error and the log shows each attempt."""
    use_models(Alpha("one", error=ServerError("boom", status=500)), Beta("one", error=OverloadedError("busy")))
    with pytest.raises(AllModelsFailedError) as caught:
        rerank_two(role("alpha:one", "beta:one"))
    assert [type(attempt.error) for attempt in caught.value.attempts] == [ServerError, OverloadedError]
    assert "boom" in str(caught.value) and "busy" in str(caught.value)
    run = latest_run()
    assert (run["status"], run["error_type"]) == ("failed", "AllModelsFailedError")
    assert attempts(run) == [("alpha:one", "failed", "ServerError"), ("beta:one", "failed", "OverloadedError")]


def test_a_single_models_failure_is_raised_as_its_own_error(use_models):
    """With one model in the chain, its own error is raised, not AllModelsFailedError."""
    (model,) = use_models(Alpha("one", error=ServerError("boom", status=503)))
    with pytest.raises(ServerError):
        rerank_two(model)


def test_every_decision_of_a_split_call_fails_over_on_its_own(use_models, role):
    """Three calls of one rerank: each has its own attempt numbers under the one run."""
    flaky = Alpha("one", answer=fails_first(1, ServerError("once")), limits=ModelLimits(max_questions=2))
    use_models(flaky, Beta("one", limits=ModelLimits(max_questions=2)))
    decirank.rerank("q", ["a", "b", "c", "d", "e", "f"], model=role("alpha:one", "beta:one"))
    children = latest_run()["children"]
    assert sorted(child["decision"] for child in children) == [1, 1, 2, 3]
    failed = [child for child in children if child["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["attempt"] == 1
    retried = [c for c in children if c["decision"] == failed[0]["decision"] and c["status"] == "success"]
    assert retried[0]["model"] == "beta:one" and retried[0]["attempt"] == 2


class _Model:
    def __init__(self, name: str, context_tokens: int | None = None):
        self.name = name
        self.provider = name.partition(":")[0]
        self.limits = ModelLimits(context_tokens=context_tokens)


def test_the_policy_alone_orders_retries_skips_and_fatal_errors():
    """The policy alone retries a 429 a bounded number of times, skips smaller contexts and raises fatal errors."""
    chain = [_Model("a:1", 100), _Model("a:2", 500), _Model("b:1", 50), _Model("b:2", 900)]
    policy = Failover(chain, max_rate_limit_retries=1)
    assert policy.next_model().name == "a:1"
    assert policy.after_failure(RateLimitError("429", retry_after=0.5)) == Retry(0.5)
    assert policy.after_failure(RateLimitError("429", retry_after=0.5)) is None, "one retry, then on"
    assert policy.next_model().name == "a:2"
    assert policy.after_failure(TooLargeError("413")) is None
    assert policy.next_model().name == "b:2", "b:1's context is smaller than a:2's"
    with pytest.raises(ModelRequestInvalidError):
        policy.after_failure(ModelRequestInvalidError("422"))
    with pytest.raises(KeyError):
        policy.after_failure(KeyError("a bug is not failed over"))


def test_the_policy_does_not_wait_past_the_budget():
    """The policy moves on rather than wait longer than the budget left, and treats an invalid answer as a failure."""
    policy = Failover([_Model("a:1"), _Model("b:1")])
    assert policy.after_failure(RateLimitError("429", retry_after=2), remaining_budget=1.0) is None
    assert policy.next_model().name == "b:1"
    assert policy.after_failure(InvalidAnswerError("p > 1")) is None
    assert policy.next_model() is None


def test_a_model_that_stays_rate_limited_fails_with_its_own_error(use_models, role):
    """A lone model that stays rate-limited fails with RateLimitError after its bounded retries."""
    use_models(Alpha("one", answer=fails_first(99, RateLimitError("slow", retry_after=0.01))))
    with pytest.raises(RateLimitError):
        rerank_two(role("alpha:one"), timeout=5)
    assert len(latest_run()["children"]) == 1 + MAX_RATE_LIMIT_RETRIES
