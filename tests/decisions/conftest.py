"""Scripted models under several providers, and the run log's view of what they did."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from decirank.backends import _providers, register_provider
from decirank.stores.runlog import current_runlog
from decirank.testing import ScriptedBackend, uniform_answers
from decirank.types.questions import DecisionRequest


class Alpha(ScriptedBackend):
    provider = "alpha"


class Beta(ScriptedBackend):
    provider = "beta"


def fails_first(times: int, error: Exception, answer: Callable[[DecisionRequest], Any] = uniform_answers):
    """An answer function that raises ``error`` on its first ``times`` calls, then answers."""
    calls = itertools.count()

    def scripted(request: DecisionRequest) -> Any:
        if next(calls) < times:
            raise error
        return answer(request)

    return scripted


@pytest.fixture
def use_models() -> Iterator[Callable[..., list[str]]]:
    """Register scripted backends under their own ``provider:model`` names for one test."""
    registered: list[str] = []

    def register(*backends: ScriptedBackend) -> list[str]:
        by_provider: dict[str, dict[str, ScriptedBackend]] = defaultdict(dict)
        for backend in backends:
            by_provider[backend.provider][backend.model] = backend
        for provider, by_model in by_provider.items():
            register_provider(
                provider,
                lambda model, _by_model=by_model, **_: _by_model[model],
                default_model=next(iter(by_model)),
                description="scripted test models",
                open_models=True,
            )
            registered.append(provider)
        return [backend.name for backend in backends]

    yield register
    for provider in registered:
        _providers.pop(provider, None)


def latest_run() -> dict[str, Any]:
    """The newest tool run, with its model calls as children."""
    runlog = current_runlog()
    assert runlog is not None
    (newest,) = runlog.runs(limit=1)
    return runlog.run(newest["id"])


def attempts(run: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """Each model call of a run as (model, status, error type), in the order they were made."""
    return [(child["model"], child["status"], child["error_type"]) for child in run["children"]]
