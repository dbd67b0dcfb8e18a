"""One budget per tool call, and a caller's cancel that ends the work at once."""

from __future__ import annotations

import asyncio
import time

import pytest

import decirank
from decirank.errors import DecisionTimeoutError, ServerError
from decirank.testing import ScriptedBackend, use_backend

from .conftest import Alpha, Beta, attempts, latest_run


async def _cancel_while_asking(model: str, backend: ScriptedBackend) -> float:
    """Start a rerank, cancel it once the model is busy, and return how long the cancel took."""
    task = asyncio.create_task(decirank.arerank("fleas", ["a dog", "a cat", "a bird"], model=model))
    while not backend.requests:
        await asyncio.sleep(0.005)
    cancelled_at = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return time.perf_counter() - cancelled_at


def test_a_cancelled_rerank_returns_at_once_and_is_recorded_as_cancelled():
    """Cancelling a rerank mid-call ends it within 0.1 s and logs the run and its model call as cancelled."""
    slow = ScriptedBackend(delay=10)
    with use_backend(slow) as model:
        took = asyncio.run(_cancel_while_asking(model, slow))
    assert took < 0.1
    run = latest_run()
    assert run["status"] == "cancelled" and run["error_type"] is None
    assert attempts(run) == [(model, "cancelled", None)]
    assert run["ended_at"] is not None


def test_a_cancel_is_never_failed_over(use_models, monkeypatch):
    """A cancelled call to the first model of a role is not retried on the next one."""
    slow, fallback = Alpha("slow", delay=10), Beta("one")
    use_models(slow, fallback)
    monkeypatch.setenv("DECIRANK_ROLE_CHAIN", "alpha:slow,beta:one")
    asyncio.run(_cancel_while_asking("chain", slow))
    assert not fallback.requests
    assert attempts(latest_run()) == [("alpha:slow", "cancelled", None)]


def test_a_50_ms_budget_against_a_slow_model_fails_with_the_timeout_error():
    """A budget that runs out raises DecisionTimeoutError (also a TimeoutError) on time and logs it on the run."""
    with use_backend(ScriptedBackend(delay=5)) as model:
        started = time.perf_counter()
        with pytest.raises(DecisionTimeoutError) as caught:
            decirank.rerank("fleas", ["a dog", "a cat"], model=model, timeout=0.05)
        took = time.perf_counter() - started
    assert 0.05 <= took < 0.5
    assert caught.value.timeout == 0.05 and isinstance(caught.value, TimeoutError)
    run = latest_run()
    assert (run["status"], run["error_type"]) == ("failed", "DecisionTimeoutError")
    assert attempts(run) == [(model, "failed", "DecisionTimeoutError")]


def test_the_budget_is_shared_by_every_model_a_call_tries(use_models, monkeypatch):
    """A failover does not restart the clock: the fallback gets what the first model left."""
    use_models(Alpha("one", delay=0.15, error=ServerError("late failure")), Beta("slow", delay=5))
    monkeypatch.setenv("DECIRANK_ROLE_CHAIN", "alpha:one,beta:slow")
    started = time.perf_counter()
    with pytest.raises(DecisionTimeoutError):
        decirank.rerank("fleas", ["a dog"], model="chain", timeout=0.25)
    assert time.perf_counter() - started < 0.6
    assert attempts(latest_run()) == [
        ("alpha:one", "failed", "ServerError"),
        ("beta:slow", "failed", "DecisionTimeoutError"),
    ]


def test_the_budget_covers_concurrent_calls_together():
    """Split work runs in parallel under the one budget, not one budget per call."""
    with use_backend(ScriptedBackend(delay=0.2)) as model:
        started = time.perf_counter()
        with pytest.raises(DecisionTimeoutError):
            decirank.rerank("q", [f"d{n}" for n in range(60)], model=model, timeout=0.1, max_documents_per_call=10)
    assert time.perf_counter() - started < 0.5
    children = latest_run()["children"]
    assert len(children) == 6
    assert {child["error_type"] for child in children} <= {"DecisionTimeoutError", None}
